use super::*;
use crate::renderer::llvmir::{ENTRY_ATTRIBUTES, ENTRY_ATTRIBUTE_GROUP};

fn slots(n: usize) -> Vec<Slot> {
    (0..n)
        .map(|k| Slot {
            bufs: 2 * k,
            nbufs: 2,
            vals: k,
            nvals: 1,
            cores: Cores::One,
        })
        .collect()
}

#[test]
fn the_c_entry_calls_every_kernel_in_order_with_its_table_slices() {
    let names = vec!["E_4_rg".to_string(), "r_8_rg".to_string()];
    let src = render_c(&names, &slots(2), 2);
    assert!(
        src.starts_with("void rg_batch_rg(void **bufs, const int *vals, int core, int ncores) {")
    );
    assert!(
        src.contains("const int from = vals[2], to = vals[3];"),
        "{src}"
    );
    let first = src
        .find("if (from <= 0 && 0 < to) E_4_rg(bufs + 0, vals + 0, 0, 1);")
        .expect(&src);
    let second = src
        .find("if (from <= 1 && 1 < to) r_8_rg(bufs + 2, vals + 1, 0, 1);")
        .expect(&src);
    assert!(first < second);
    assert_eq!(src.matches("_rg(bufs + ").count(), 2);
}

#[test]
fn the_llvm_entry_declares_each_kernel_once_and_calls_each_in_order() {
    let names = vec![
        "E_4_rg".to_string(),
        "E_4_rg".to_string(),
        "r_8_rg".to_string(),
    ];
    for (opaque, pp, p32) in [(true, "ptr", "ptr"), (false, "i8**", "i32*")] {
        let ir = render_llvm(&names, &slots(3), 3, opaque);
        assert_eq!(
            ir.matches(&format!("declare void @E_4_rg({pp}, {p32}, i32, i32)"))
                .count(),
            1,
            "{ir}"
        );
        assert_eq!(ir.matches("declare void @").count(), 2, "{ir}");
        assert!(ir.contains(&format!(
            "define void @rg_batch_rg({pp} %bufs, {p32} %vals, i32 %core, i32 %ncores)"
        )));
        assert!(ir.contains(&format!("getelementptr inbounds i32, {p32} %vals, i64 4")));
        let calls: Vec<&str> = ir.lines().filter(|l| l.contains("call void @")).collect();
        assert_eq!(calls.len(), 3, "{ir}");
        assert!(calls[2].contains(&format!("@r_8_rg({pp} %bp2, {p32} %vp2, i32 0, i32 1)")));
        assert!(ir.contains("%bp2 = getelementptr inbounds"), "{ir}");
        assert!(
            ir.contains(&format!("i32 %ncores) #{ENTRY_ATTRIBUTE_GROUP} {{\nentry:")),
            "{ir}"
        );
        assert!(
            ir.ends_with(&format!(
                "k3:\n  ret void\n}}\nattributes #{ENTRY_ATTRIBUTE_GROUP} = {{ {ENTRY_ATTRIBUTES} }}"
            )),
            "{ir}"
        );
    }
}

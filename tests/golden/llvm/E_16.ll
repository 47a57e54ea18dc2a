define internal void @E_16(ptr noalias %data0, ptr noalias %data1, ptr noalias %data2, i32 %split.lo, i32 %split.hi) #0 {
entry:
  br label %loop_header_0
loop_header_0:
  %ridx0 = phi i32 [ %split.lo, %entry ], [ %ridx0.next, %loop_latch_0 ]
  %ridx0.c = icmp slt i32 %ridx0, %split.hi
  br i1 %ridx0.c, label %loop_body_0, label %loop_exit_0
loop_body_0:
  %val0.p = getelementptr inbounds float, ptr %data1, i32 %ridx0
  %val0.m = load float, ptr %val0.p, align 4
  %val1.p = getelementptr inbounds float, ptr %data2, i32 %ridx0
  %val1.m = load float, ptr %val1.p, align 4
  %alu0 = fadd float %val0.m, %val1.m
  %store0.p = getelementptr inbounds float, ptr %data0, i32 %ridx0
  store float %alu0, ptr %store0.p, align 4
  br label %loop_latch_0
loop_latch_0:
  %ridx0.next = add nsw i32 %ridx0, 1
  br label %loop_header_0
loop_exit_0:
  ret void
}
define void @E_16_rg(ptr %bufs, ptr %vals, i32 %core, i32 %ncores) #5 {
entry:
  %ok.a = icmp sge i32 %ncores, 1
  %ok.b = icmp sge i32 %core, 0
  %ok.c = icmp slt i32 %core, %ncores
  %ok.ab = and i1 %ok.a, %ok.b
  %ok = and i1 %ok.ab, %ok.c
  br i1 %ok, label %run, label %done
run:
  %b0.p = getelementptr inbounds ptr, ptr %bufs, i64 0
  %b0.r = load ptr, ptr %b0.p, align 8
  %b1.p = getelementptr inbounds ptr, ptr %bufs, i64 1
  %b1.r = load ptr, ptr %b1.p, align 8
  %b2.p = getelementptr inbounds ptr, ptr %bufs, i64 2
  %b2.r = load ptr, ptr %b2.p, align 8
  %share.n64 = sext i32 16 to i64
  %share.core = sext i32 %core to i64
  %share.ncores = sext i32 %ncores to i64
  %share.core1 = add i64 %share.core, 1
  %share.lom = mul i64 %share.n64, %share.core
  %share.lod = sdiv i64 %share.lom, %share.ncores
  %share.lo = trunc i64 %share.lod to i32
  %share.him = mul i64 %share.n64, %share.core1
  %share.hid = sdiv i64 %share.him, %share.ncores
  %share.hi = trunc i64 %share.hid to i32
  call void @E_16(ptr %b0.r, ptr %b1.r, ptr %b2.r, i32 %share.lo, i32 %share.hi)
  br label %done
done:
  ret void
}
attributes #0 = { nounwind "no-builtins" "no-trapping-math"="true" }
attributes #5 = { noinline nounwind optnone "no-builtins" "no-trapping-math"="true" }

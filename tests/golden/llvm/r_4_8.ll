define internal void @r_4_8(ptr noalias %data0, ptr noalias %data1, i32 %split.lo, i32 %split.hi) #0 {
entry:
  br label %loop_header_0
loop_header_0:
  %ridx0 = phi i32 [ %split.lo, %entry ], [ %ridx0.next, %loop_latch_0 ]
  %ridx0.c = icmp slt i32 %ridx0, %split.hi
  br i1 %ridx0.c, label %loop_body_0, label %loop_exit_0
loop_body_0:
  %wide0 = sext i32 %ridx0 to i64
  %alu0 = mul i64 %wide0, 8
  br label %loop_header_1
loop_header_1:
  %ridx1 = phi i32 [ 0, %loop_body_0 ], [ %ridx1.next, %loop_latch_1 ]
  %acc0.1 = phi float [ 0.0, %loop_body_0 ], [ %alu4, %loop_latch_1 ]
  %ridx1.c = icmp slt i32 %ridx1, 8
  br i1 %ridx1.c, label %loop_body_1, label %loop_exit_1
loop_body_1:
  %wide1 = sext i32 %ridx1 to i64
  %alu1 = add i64 %alu0, %wide1
  %val0.p = getelementptr inbounds half, ptr %data1, i64 %alu1
  %val0.m = load half, ptr %val0.p, align 2
  %cast0 = fpext half %val0.m to float
  %alu2 = fmul float %cast0, 2.0
  %alu3 = fadd float %alu2, 1.0
  %alu4 = fadd float %alu3, %acc0.1
  br label %loop_latch_1
loop_latch_1:
  %ridx1.next = add nsw i32 %ridx1, 1
  br label %loop_header_1
loop_exit_1:
  %store0.p = getelementptr inbounds float, ptr %data0, i32 %ridx0
  store float %acc0.1, ptr %store0.p, align 4
  br label %loop_latch_0
loop_latch_0:
  %ridx0.next = add nsw i32 %ridx0, 1
  br label %loop_header_0
loop_exit_0:
  ret void
}
define void @r_4_8_rg(ptr %bufs, ptr %vals, i32 %core, i32 %ncores) #5 {
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
  %share.n64 = sext i32 4 to i64
  %share.core = sext i32 %core to i64
  %share.ncores = sext i32 %ncores to i64
  %share.core1 = add i64 %share.core, 1
  %share.lom = mul i64 %share.n64, %share.core
  %share.lod = sdiv i64 %share.lom, %share.ncores
  %share.lo = trunc i64 %share.lod to i32
  %share.him = mul i64 %share.n64, %share.core1
  %share.hid = sdiv i64 %share.him, %share.ncores
  %share.hi = trunc i64 %share.hid to i32
  call void @r_4_8(ptr %b0.r, ptr %b1.r, i32 %share.lo, i32 %share.hi)
  br label %done
done:
  ret void
}
attributes #0 = { nounwind "no-builtins" "no-trapping-math"="true" }
attributes #5 = { noinline nounwind optnone "no-builtins" "no-trapping-math"="true" }

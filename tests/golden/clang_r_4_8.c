#if defined(__clang__) && __clang_major__ < 15
typedef __fp16 half;
#else
typedef _Float16 half;
#endif
void r_4_8(float* restrict data0, const half* restrict data1, int core, int ncores) {
  for (int ridx0 = (int)(((long long)4*core)/ncores); ridx0 < (int)(((long long)4*(core+1))/ncores); ridx0++) {
    float acc0 = 0.0f;
    for (int ridx1 = 0; ridx1 < 8; ridx1++) {
      half val0 = data1[(ridx0*8)+ridx1];
      acc0 = (((float)(val0)*2.0f)+1.0f+acc0);
    }
    data0[ridx0] = acc0;
  }
}
void r_4_8_rg(void **bufs, const int *vals, int core, int ncores) {
  if (ncores < 1 || core < 0 || core >= ncores) return;
  r_4_8((float*)bufs[0], (const half*)bufs[1], core, ncores);
}

void r_4_8(float* restrict data0, const float* restrict data1, int core, int ncores) {
  for (int ridx0 = (int)(((long long)4*core)/ncores); ridx0 < (int)(((long long)4*(core+1))/ncores); ridx0++) {
    float acc0 = 0.0f;
    for (int ridx1 = 0; ridx1 < 8; ridx1++) {
      float val0 = data1[(ridx0*8)+ridx1];
      acc0 = (val0+acc0);
    }
    data0[ridx0] = acc0;
  }
}
void r_4_8_rg(void **bufs, const int *vals, int core, int ncores) {
  if (ncores < 1 || core < 0 || core >= ncores) return;
  r_4_8((float*)bufs[0], (const float*)bufs[1], core, ncores);
}

void E_16(float* restrict data0, const float* restrict data1, const float* restrict data2, int core, int ncores) {
  for (int ridx0 = (int)(((long long)16*core)/ncores); ridx0 < (int)(((long long)16*(core+1))/ncores); ridx0++) {
    float val0 = data1[ridx0];
    float val1 = data2[ridx0];
    data0[ridx0] = (val0+val1);
  }
}
void E_16_rg(void **bufs, const int *vals, int core, int ncores) {
  if (ncores < 1 || core < 0 || core >= ncores) return;
  E_16((float*)bufs[0], (const float*)bufs[1], (const float*)bufs[2], core, ncores);
}

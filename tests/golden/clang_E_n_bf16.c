#ifndef RG_BF16_HELPERS
#define RG_BF16_HELPERS
static inline float rg_bf16_to_float(unsigned short x) { unsigned int u = ((unsigned int)x) << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline unsigned short rg_float_to_bf16(float f) { unsigned int u; __builtin_memcpy(&u, &f, 4); if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }
#endif
void E_n(unsigned short* restrict data0, const unsigned short* restrict data1, const int m, const int n, int core, int ncores) {
  for (int ridx0 = (int)(((long long)n*core)/ncores); ridx0 < (int)(((long long)n*(core+1))/ncores); ridx0++) {
    float val0 = rg_bf16_to_float(data1[ridx0]);
    data0[ridx0] = rg_float_to_bf16((val0*(float)(m)));
  }
}
void E_n_rg(void **bufs, const int *vals, int core, int ncores) {
  if (ncores < 1 || core < 0 || core >= ncores) return;
  E_n((unsigned short*)bufs[0], (const unsigned short*)bufs[1], vals[0], vals[1], core, ncores);
}

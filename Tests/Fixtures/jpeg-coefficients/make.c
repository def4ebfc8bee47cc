/* How Tests/Fixtures/jpeg-coefficients/*.jpg were made (not built by the package):
 * a real photo's coefficients, replaced block by block with extreme values (DC only,
 * row 0 only, rows 0 and 4, every coefficient, sparse) under random quantisation
 * tables, so that dequantised values wrap around 16 bits and the IDCTs saturate.
 *   vipsthumbnail snap.jpg -s 120x90 -o h420.jpg[Q=90,subsample-mode=on]
 *   vipsthumbnail snap2.jpg -s 100x75 -o h444.jpg[Q=90,subsample-mode=off]
 *   cc -O2 make.c -o make -ljpeg && ./make h420.jpg 4 a 1 && ./make h444.jpg 4 b 2 */
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>
static unsigned long long st = 88172645463325252ULL;
static unsigned rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (unsigned) st; }
int main(int argc, char **argv) {
  const char *src = argv[1]; int n = atoi(argv[2]); const char *prefix = argv[3]; st += atoi(argv[4]);
  for (int f = 0; f < n; f++) {
    struct jpeg_decompress_struct d; struct jpeg_compress_struct c; struct jpeg_error_mgr e1, e2;
    d.err = jpeg_std_error(&e1); c.err = jpeg_std_error(&e2);
    jpeg_create_decompress(&d); FILE *in = fopen(src, "rb"); jpeg_stdio_src(&d, in); jpeg_read_header(&d, TRUE);
    jvirt_barray_ptr *arr = jpeg_read_coefficients(&d);
    jpeg_create_compress(&c); char name[256]; snprintf(name, sizeof name, "%s-%03d.jpg", prefix, f); FILE *out = fopen(name, "wb"); jpeg_stdio_dest(&c, out);
    jpeg_copy_critical_parameters(&d, &c); c.optimize_coding = TRUE;
    int mode = f % 4;
    for (int t = 0; t < 2; t++) if (c.quant_tbl_ptrs[t]) for (int k = 0; k < 64; k++) {
      unsigned q = mode == 0 ? 1 + rnd() % 255 : mode == 1 ? 200 + rnd() % 56 : 1 + rnd() % 40; c.quant_tbl_ptrs[t]->quantval[k] = q; }
    for (int ci = 0; ci < d.num_components; ci++) {
      jpeg_component_info *comp = d.comp_info + ci;
      for (JDIMENSION by = 0; by < comp->height_in_blocks; by++) {
        JBLOCKARRAY rows = d.mem->access_virt_barray((j_common_ptr) &d, arr[ci], by, 1, TRUE);
        for (JDIMENSION bx = 0; bx < comp->width_in_blocks; bx++) {
          JCOEF *b = rows[0][bx]; int pat = rnd() % 6;
          for (int k = 0; k < 64; k++) {
            int big = (rnd() % 2047) - 1023; int dc = (rnd() % 2047) - 1023;
            switch (pat) {
              case 0: b[k] = k == 0 ? dc : 0; break;                       /* DC only */
              case 1: b[k] = k == 0 ? dc : (k < 8 ? big : 0); break;       /* row 0 only (natural order: k<8) */
              case 2: b[k] = k == 0 ? dc : (k < 8 || k == 32 + (rnd()%8) ? big : 0); break; /* row 0 and row 4 */
              case 3: b[k] = k == 0 ? dc : big; break;                     /* everything */
              case 4: b[k] = k == 0 ? dc : (rnd() % 8 == 0 ? big : 0); break;
              default: break;                                              /* unchanged */
            }
          }
        }
      }
    }
    jpeg_write_coefficients(&c, arr); jpeg_finish_compress(&c); jpeg_destroy_compress(&c); fclose(out);
    jpeg_finish_decompress(&d); jpeg_destroy_decompress(&d); fclose(in);
  }
}

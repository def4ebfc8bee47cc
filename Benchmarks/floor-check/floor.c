/* Issue 27's decode floor, independent of SnapThumb: each JPEG named on the command line
 * read into memory and decoded at 1/4 scale by libjpeg-turbo (its defaults: islow IDCT,
 * fancy upsampling), every row read and thrown away. Exit 1 if a file cannot be read. */
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

int main(int argc, char **argv) {
    JSAMPROW row = NULL;
    size_t row_size = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { perror(argv[i]); return 1; }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        unsigned char *buf = malloc((size_t) n);
        if (!buf || fread(buf, 1, (size_t) n, f) != (size_t) n) { fprintf(stderr, "%s: short read\n", argv[i]); return 1; }
        fclose(f);
        struct jpeg_decompress_struct c;
        struct jpeg_error_mgr e;
        c.err = jpeg_std_error(&e);
        jpeg_create_decompress(&c);
        jpeg_mem_src(&c, buf, (unsigned long) n);
        jpeg_read_header(&c, TRUE);
        c.scale_num = 1;
        c.scale_denom = 4;
        jpeg_start_decompress(&c);
        size_t need = (size_t) c.output_width * (size_t) c.output_components;
        if (need > row_size) { free(row); row = malloc(need); row_size = need; }
        while (c.output_scanline < c.output_height) jpeg_read_scanlines(&c, &row, 1);
        jpeg_finish_decompress(&c);
        jpeg_destroy_decompress(&c);
        free(buf);
    }
    free(row);
    return 0;
}

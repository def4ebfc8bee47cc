/*
 * jpegshim: SnapThumb's JPEG codec work over libjpeg-turbo: a scaled decode straight
 * with libjpeg, SnapThumb's own Huffman decoder and paired IDCTs installed into
 * libjpeg's decompressor (jpeg_entropy.c, jpeg_idct.c: these read libjpeg-turbo's
 * private structs, so they run only on a libjpeg-turbo version they were tested
 * against: snap_jpeg_internals_ok), and the square's JPEG encoder (jpeg_plan.c).
 * The riskiest C of SnapThumb, in a target of its own.
 */
#ifndef SNAP_JPEGSHIM_H
#define SNAP_JPEGSHIM_H

#include <stddef.h>
#include <stdint.h>

/* ==== libjpeg decoding (jpeg_decode.c) ==== */

/* JPEG decoding straight with libjpeg, for the formats' common case: the
 * same scaled decode as libvips' jpegload shrink (byte-identical output,
 * same size rounding), without a libvips pipeline around it.
 * snap_jpeg_open reads the header (markers kept: EXIF, ICC); on failure the
 * handle still holds the message. fail_on is VipsFailOn (0 none, 1
 * truncated, 2 error, 3 warning). Always snap_jpeg_close the handle. */
typedef struct snap_jpeg snap_jpeg;
typedef struct {
	int width, height, components;
	int colour_space;          /* J_COLOR_SPACE: 1 grey, 2 RGB, 3 YCbCr, 4 CMYK, 5 YCCK */
	int multiscan;             /* progressive: every coefficient is held in memory */
	const unsigned char *exif; /* first APP1 "Exif" payload, valid until the first decode */
	size_t exif_len;
	const unsigned char *icc;  /* assembled ICC profile, valid until close */
	size_t icc_len;
} snap_jpeg_info;
int snap_jpeg_open(const void *buf, size_t len, int fail_on, snap_jpeg **out, snap_jpeg_info *info);
/* Decodes at 1/shrink (1, 2, 4, 8) to packed 8-bit grey, RGB or CMYK (Adobe
 * inversion undone). *out is malloc'd: free with snap_free. */
int snap_jpeg_decode(snap_jpeg *j, int shrink, unsigned char **out, int *width, int *height, int *bands, int *cmyk);
/* The same decode into the caller's buffer of at least snap_jpeg_decode_capacity
 * bytes (whole libjpeg rows and a spare one); the first width × height × bands
 * bytes are the packed pixels. Saves a copy of the decoded image. With region
 * (x, y, width, height in the 1/shrink image; NULL or width 0: all of it) only that
 * part is decoded (left edge moved to an iMCU boundary; region[] is set to what
 * came out): the same pixels as there in a whole decode but where it cuts columns,
 * as JPEGDecoder.decodePixels says. */
int snap_jpeg_decode_capacity(snap_jpeg *j, int shrink, size_t *bytes);
int snap_jpeg_decode_into(snap_jpeg *j, int shrink, unsigned char *pixels, size_t capacity,
                          int *width, int *height, int *bands, int *cmyk, int *region);
const char *snap_jpeg_message_text(snap_jpeg *j);
/* 1 when the last decode's Huffman decoding was SnapThumb's (jpeg_entropy.c:
 * baseline single-scan files it decoded to the end), 0 when it was libjpeg's. */
int snap_jpeg_entropy_used(snap_jpeg *j);
/* Decodes with libjpeg's Huffman decoder only: the reference the tests hold ours to. */
void snap_jpeg_libjpeg_entropy(snap_jpeg *j);
/* From any thread: the decode stops at its next row band with "killed". */
void snap_jpeg_kill(snap_jpeg *j);
void snap_jpeg_close(snap_jpeg *j);

/* ==== JPEG encoding (jpeg_plan.c) ==== */

/* The square JPEG of a budget search from one transform (see jpeg_plan.c):
 * snap_jpeg_plan_new converts and transforms packed RGB once (subsample 1 for
 * 4:4:4, 2 for 4:2:0); snap_jpeg_plan_estimate gives the byte count of the
 * baseline, optimised-Huffman JPEG at a quality without writing it (exact but
 * for the stuffed bytes after 0xFF in the entropy-coded data, which it
 * estimates); snap_jpeg_plan_write writes that file (free with snap_free), and
 * snap_jpeg_plan_write_libjpeg has libjpeg write it from the same coefficients
 * and tables (the tests' reference: the bytes are the same). */
typedef struct snap_jpeg_plan snap_jpeg_plan;
int snap_jpeg_plan_new(const unsigned char *rgb, int width, int height, int subsample, snap_jpeg_plan **out);
long snap_jpeg_plan_estimate(snap_jpeg_plan *p, int quality);
int snap_jpeg_plan_write(snap_jpeg_plan *p, int quality, unsigned char **out, size_t *out_len);
int snap_jpeg_plan_write_libjpeg(snap_jpeg_plan *p, int quality, unsigned char **out, size_t *out_len);
void snap_jpeg_plan_free(snap_jpeg_plan *p);
const char *snap_jpeg_version(void);

/* The libjpeg-turbo version SnapThumb was built against (LIBJPEG_TURBO_VERSION), and the
 * one loaded at run time (read from the library's own version string; "" when it has none). */
const char *snap_jpeg_runtime_version(void);
/* 1 when the loaded libjpeg-turbo is one the private-struct code (SnapThumb's Huffman
 * decoder and paired IDCTs) was tested against and the same as at build time; 0: libjpeg's
 * own decoding runs instead (the same pixels, a little more CPU). */
int snap_jpeg_internals_ok(void);

#endif

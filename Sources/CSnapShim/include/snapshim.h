/*
 * snapshim: the only C that SnapThumb writes.
 *
 * Why it exists: Swift cannot call C variadic functions, and almost every
 * libvips operation is variadic (`vips_thumbnail_image(in, &out, w, "height", h, NULL)`).
 * Each function here is one fixed-argument wrapper around one libvips call, or a
 * small helper for a macro that Swift does not import (libexif's entry lookup,
 * zlib). Every function that can fail returns 0 on success and
 * -1 on failure; the caller then takes the message with snap_error_take().
 */
#ifndef SNAPSHIM_H
#define SNAPSHIM_H

#include <stddef.h>
#include <stdint.h>

#include <vips/vips.h>

/* ==== libvips and GLib (vips.c): opened with dlopen on first need ==== */

/* The shared object opened at the first snap_init (libvips is not linked). */
#define SNAP_VIPS_SONAME "libvips.so.42"
/* Open and start libvips once per process: operation cache off (memory stays
 * flat), every loader blocked except JPEG, PNG, WebP, HEIF/AVIF and GIF. No other
 * libvips function may be called before it has succeeded. */
int snap_init(const char *argv0, int vips_threads);
/* The libvips version SnapThumb was built against; snap_init refuses any other. */
const char *snap_vips_version(void);
/* Counts GLib/libvips warnings routed through our handler (they are dropped
 * unless `verbose` is set: they cannot be tied to one job in a shared process). */
void snap_set_warnings_verbose(int verbose);
unsigned long snap_warning_count(void);
/* The libvips error buffer is process-global: copy-and-clear in one step.
 * Returns a malloc'd string (free with snap_free) or NULL when empty. */
char *snap_error_take(void);
void snap_free(void *p);
void snap_unref(VipsImage *image);
/* Frees memory that libvips allocated (vips_jpegsave_buffer's output). */
void snap_g_free(void *p);
/* Header fields (VipsBandFormat and VipsInterpretation as int). */
int snap_image_width(VipsImage *image);
int snap_image_height(VipsImage *image);
int snap_image_bands(VipsImage *image);
int snap_image_has_alpha(VipsImage *image);
int snap_image_format(VipsImage *image);
int snap_image_interpretation(VipsImage *image);
/* Name of the loader libvips would pick for these bytes (e.g. "jpegload_buffer"),
 * or NULL. */
const char *snap_find_loader(const void *buf, size_t len);
/* vips_image_new_from_buffer with an option string ("shrink=8,fail_on=warning"). */
int snap_load(const void *buf, size_t len, const char *options, VipsImage **out);
int snap_copy_memory(VipsImage *in, VipsImage **out);
/* Metadata helpers (the getters are functions in libvips, but these fold the
 * "is the field there" check in). */
int snap_get_blob(VipsImage *in, const char *name, const void **data, size_t *len);
int snap_get_int(VipsImage *in, const char *name, int *value);
/* Copy of `in` with an ICC profile attached (HEIC: the decoded image's own
 * profile blob is unreliable in 8.14.1, so the header's copy is attached). */
int snap_with_profile(VipsImage *in, const void *profile, size_t len, VipsImage **out);
/* Orientation and geometry. */
int snap_rot(VipsImage *in, VipsImage **out, int degrees);
int snap_flip_horizontal(VipsImage *in, VipsImage **out);
int snap_resize(VipsImage *in, VipsImage **out, double scale);
int snap_shrink(VipsImage *in, VipsImage **out, double hshrink, double vshrink);
/* vips_thumbnail_image to exactly width x height: size=both, no_rotate, the
 * given VipsInteresting crop. The input must already be sRGB without profile. */
int snap_thumbnail_image(VipsImage *in, VipsImage **out, int width, int height, int crop);
int snap_extract_area(VipsImage *in, VipsImage **out, int left, int top, int width, int height);
/* Colour. */
int snap_icc_to_srgb(VipsImage *in, VipsImage **out, const char *input_profile, int embedded);
int snap_colourspace_srgb(VipsImage *in, VipsImage **out);
int snap_cast(VipsImage *in, VipsImage **out, int format);
int snap_linear1(VipsImage *in, VipsImage **out, double a, double b);
int snap_bandjoin2(VipsImage *a, VipsImage *b, VipsImage **out);
int snap_flatten(VipsImage *in, VipsImage **out, double r, double g, double b);
int snap_premultiply(VipsImage *in, VipsImage **out);
int snap_unpremultiply(VipsImage *in, VipsImage **out);
int snap_extract_bands(VipsImage *in, VipsImage **out, int band, int n);
int snap_bandjoin_alpha255(VipsImage *in, VipsImage **out);
/* An 8-bit image from packed pixels (copied): sRGB, B_W (1 band) or CMYK. */
int snap_from_memory(const void *pixels, int width, int height, int bands, int cmyk, VipsImage **out);
/* Cancel the computation of an image from another thread. */
void snap_kill(VipsImage *image);
/* Encode a stripped JPEG (progressive if interlace). subsample: VipsForeignSubsample. */
int snap_jpegsave(VipsImage *in, void **buf, size_t *len, int quality, int optimize_coding, int subsample, int interlace,
                  int restart_interval);
/* A stripped 8-bit 4:4:4 HEIF of `in`: AV1 (AVIF, libheif's aom encoder) when av1
 * is set, else HEVC (HEIC, x265). quality 1–100, effort 0–9 (libheif speed 9 - effort).
 * Free the buffer with snap_g_free. */
int snap_heifsave(VipsImage *in, void **buf, size_t *len, int av1, int quality, int effort);
/* libheif's version (loaded with libvips), or NULL before snap_init or when it cannot be found. */
const char *snap_heif_version(void);

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
/* Uncompressed pixels, row-major (caller frees with snap_free). */
int snap_write_memory(VipsImage *in, void **buf, size_t *len);
const char *snap_jpeg_version(void);

/* ==== libexif (exif.c) ==== */

/* libexif: orientation tag of an EXIF blob (with or without the "Exif\0\0"
 * header), 0 when absent or unreadable. Mandatory tags are not invented. */
int snap_exif_orientation(const void *exif, size_t len);
/* Versions for `snapthumb version`: libexif (as built against) and libjpeg(-turbo). */
const char *snap_exif_version(void);

/* ==== libimagequant (imagequant.c) ==== */

/* libimagequant: an adaptive palette of at most max_colours for packed RGBA
 * pixels. Writes RGBA entries to palette (256*4 bytes) and the count.
 * Runs libimagequant single-threaded (its OpenMP threads cost time and make
 * float reductions order-dependent on 625-pixel images). */
int snap_quantize_palette(const unsigned char *rgba, int width, int height, int max_colours,
                          int speed, unsigned char *palette, int *count);
const char *snap_liq_version(void);

/* ==== zlib (zlib.c) ==== */

/* zlib. */
unsigned long snap_crc32(unsigned long crc, const void *data, size_t len);
/* Deflate into out (capacity *out_len, set to the size written); 0 or -1. */
int snap_deflate(const void *in, size_t in_len, int level, int strategy, void *out, size_t *out_len);
size_t snap_deflate_bound(size_t in_len);
const char *snap_zlib_version(void);

/* ==== Resampling packed RGB (resample.c) ==== */

/* The exact centre side×side square of packed 8-bit RGB (width×height), scaled
 * to fill (Lanczos3, widened when shrinking), like vips_thumbnail_image's centre
 * crop but without rounding the crop to whole pixels, and without a libvips pipeline: that costs more than the pixels
 * on a 135×180 image. Returns 0, or -1 when memory runs out. */
int snap_square_rgb(const unsigned char *rgb, int width, int height, int side, unsigned char *out);
/* The same square of a width × height image of which only a part is in memory:
 * rgb holds region_width × region_height pixels starting at (left, top). Fails
 * (-2) if the square's taps reach outside that part. */
int snap_square_rgb_region(const unsigned char *rgb, int region_width, int region_height, int left, int top,
                           int width, int height, int side, unsigned char *out);
/* Packed 8-bit RGB turned upright: rotated clockwise by rotate (0, 90, 180 or
 * 270) degrees, then mirrored left-right when flip is set, as vips_rot then
 * vips_flip do. out holds width*height*3 bytes; it is height wide after 90 or 270. */
/* Neighbour sums of packed RGB side×side for the JPEG size prediction (see resample.c). */
void snap_pixel_steps(const unsigned char *rgb, int side, long *luma, long *chroma, long *second,
                      long *flat, long *squares);
void snap_orient_rgb(const unsigned char *rgb, int width, int height, int rotate, int flip, unsigned char *out);

/* ==== The drawn pixel art (oklab.c) ==== */

#if defined(__x86_64__) && defined(__clang__)
/* 1 when this processor has AVX2 (asked once): the kernels of oklab.c and resample.c
 * then run their AVX2 builds, which compute the same bits. */
int snap_cpu_has_avx2(void);
#endif

/* The drawn pixel art's arithmetic in OKLab (oklab.c), bit for bit as SnapThumbCore's
 * Swift: OKLab of count packed 8-bit sRGB pixels (linear: the 256-entry sRGB-to-linear
 * table), interleaved l, a, b; */
void snap_oklab_image(const unsigned char *rgb, long count, const double *linear, double *lab);
/* each factor x factor block's representative colour (DrawnGrid.representative) of a
 * side x side OKLab image, (side / factor)^2 cells, interleaved (scratch: 4 factor^2); */
void snap_drawn_cells(const double *lab, int side, int factor, double *scratch, double *out);
/* OKLab.clippedToGamut of count interleaved colours (in and out may not overlap); */
void snap_gamut_clip(const double *in, long count, double *out);
/* Lloyd's k-means from k interleaved centres (updated in place) over count points
 * (components pl, pa, pb), as OKLabQuantizer.kMeans (scratch: 2 count + k longs;
 * work: count + 3 k doubles). */
void snap_kmeans_refine(const double *pl, const double *pa, const double *pb, long count, double *centres, int k, int iterations,
			long *scratch, double *work);

/* Palette indices packed depth bits each (1, 2, 4 or 8), most significant first, each
 * row of width indices into (width * depth + 7) / 8 bytes: the PNG's rows unfiltered. */
void snap_pack_indices(const unsigned char *indices, int width, int height, int depth, unsigned char *out);

#endif

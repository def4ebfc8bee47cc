/*
 * vipsshim: fixed-argument wrappers for libvips (opened with dlopen on first need) and
 * libexif. Swift cannot call C variadic functions, and almost every libvips operation
 * is variadic (`vips_thumbnail_image(in, &out, w, "height", h, NULL)`); each function
 * here is one fixed-argument wrapper around one libvips call, or a helper for a macro
 * Swift does not import. Every function that can fail returns 0 on success and -1 on
 * failure; the caller then takes the message with snap_error_take().
 *
 * libvips' own headers stay inside vips.c: this header names its image type only as
 * an incomplete struct, and the few enum values Swift needs as SNAP_ constants (vips.c
 * checks at compile time that they are libvips' values).
 */
#ifndef SNAP_VIPSSHIM_H
#define SNAP_VIPSSHIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct _VipsImage VipsImage;

/* libvips' VipsInteresting, VipsForeignSubsample, VipsBandFormat and VipsInterpretation values. */
enum {
	SNAP_INTERESTING_CENTRE = 1,
	SNAP_INTERESTING_ATTENTION = 3,
	SNAP_SUBSAMPLE_AUTO = 0,
	SNAP_SUBSAMPLE_ON = 1,
	SNAP_SUBSAMPLE_OFF = 2,
	SNAP_FORMAT_UCHAR = 0,
	SNAP_FORMAT_USHORT = 2,
	SNAP_FORMAT_FLOAT = 6,
	SNAP_INTERPRETATION_B_W = 1,
	SNAP_INTERPRETATION_CMYK = 15,
	SNAP_INTERPRETATION_RGB = 17,
	SNAP_INTERPRETATION_sRGB = 22,
	SNAP_INTERPRETATION_GREY16 = 26,
	SNAP_INTERPRETATION_RGB16 = 25,
};

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

/* Uncompressed pixels, row-major (caller frees with snap_free). */
int snap_write_memory(VipsImage *in, void **buf, size_t *len);

/* ==== libexif (exif.c) ==== */

/* libexif: orientation tag of an EXIF blob (with or without the "Exif\0\0"
 * header), 0 when absent or unreadable. Mandatory tags are not invented. */
int snap_exif_orientation(const void *exif, size_t len);
/* Versions for `snapthumb version`: libexif (as built against) and libjpeg(-turbo). */
const char *snap_exif_version(void);

#endif

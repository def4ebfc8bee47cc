/* libvips (opened with dlopen on first need) and GLib: start-up, errors, and one fixed-argument
 * wrapper per variadic libvips call. */
#define _GNU_SOURCE 1
#include <vips/vips.h>
#include "vipsshim.h"
#include "kernelshim.h"

/* The SNAP_ values the header gives Swift are libvips' own. */
_Static_assert(SNAP_INTERESTING_CENTRE == VIPS_INTERESTING_CENTRE, "VipsInteresting");
_Static_assert(SNAP_INTERESTING_ATTENTION == VIPS_INTERESTING_ATTENTION, "VipsInteresting");
_Static_assert(SNAP_SUBSAMPLE_AUTO == VIPS_FOREIGN_SUBSAMPLE_AUTO, "VipsForeignSubsample");
_Static_assert(SNAP_SUBSAMPLE_ON == VIPS_FOREIGN_SUBSAMPLE_ON, "VipsForeignSubsample");
_Static_assert(SNAP_SUBSAMPLE_OFF == VIPS_FOREIGN_SUBSAMPLE_OFF, "VipsForeignSubsample");
_Static_assert(SNAP_FORMAT_UCHAR == VIPS_FORMAT_UCHAR, "VipsBandFormat");
_Static_assert(SNAP_FORMAT_USHORT == VIPS_FORMAT_USHORT, "VipsBandFormat");
_Static_assert(SNAP_FORMAT_FLOAT == VIPS_FORMAT_FLOAT, "VipsBandFormat");
_Static_assert(SNAP_INTERPRETATION_B_W == VIPS_INTERPRETATION_B_W, "VipsInterpretation");
_Static_assert(SNAP_INTERPRETATION_CMYK == VIPS_INTERPRETATION_CMYK, "VipsInterpretation");
_Static_assert(SNAP_INTERPRETATION_RGB == VIPS_INTERPRETATION_RGB, "VipsInterpretation");
_Static_assert(SNAP_INTERPRETATION_sRGB == VIPS_INTERPRETATION_sRGB, "VipsInterpretation");
_Static_assert(SNAP_INTERPRETATION_GREY16 == VIPS_INTERPRETATION_GREY16, "VipsInterpretation");
_Static_assert(SNAP_INTERPRETATION_RGB16 == VIPS_INTERPRETATION_RGB16, "VipsInterpretation");

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <dlfcn.h>

/*
 * libvips is opened with dlopen the first time an image needs it, not linked:
 * with its ~90 dependencies in the link, every process start (each backfill
 * worker, each CLI call) spent about 24 ms in the dynamic linker, and a plain
 * JPEG never needs libvips at all. Every libvips and GLib function this file
 * calls is reached through a pointer looked up once in snap_init; the defines
 * below let the code read as ordinary calls.
 */
#define SNAP_VIPS_SYMBOLS(X) \
	X(vips_version) X(vips_init) X(vips_error_buffer_copy) \
	X(vips_cache_set_max) X(vips_cache_set_max_mem) X(vips_cache_set_max_files) \
	X(vips_concurrency_set) X(vips_operation_block_set) \
	X(vips_foreign_find_load_buffer) X(vips_image_new_from_buffer) X(vips_image_copy_memory) \
	X(vips_image_get_typeof) X(vips_image_get_blob) X(vips_image_get_int) X(vips_image_set_blob_copy) \
	X(vips_image_get_width) X(vips_image_get_height) X(vips_image_get_bands) \
	X(vips_image_get_format) X(vips_image_get_interpretation) X(vips_image_hasalpha) \
	X(vips_copy) X(vips_rot) X(vips_flip) X(vips_resize) X(vips_shrink) X(vips_thumbnail_image) \
	X(vips_extract_area) X(vips_icc_transform) X(vips_colourspace) X(vips_cast) X(vips_linear1) \
	X(vips_bandjoin2) X(vips_array_double_new) X(vips_flatten) X(vips_area_unref) \
	X(vips_premultiply) X(vips_unpremultiply) X(vips_extract_band) X(vips_bandjoin_const1) \
	X(vips_jpegsave_buffer) X(vips_heifsave_buffer) X(vips_image_write_to_memory) X(vips_image_set_kill) \
	X(vips_image_new_from_memory_copy) \
	X(g_free) X(g_object_unref) X(g_log_set_handler)

#define SNAP_DECLARE(name) static __typeof__(name) *snap_dl_##name;
SNAP_VIPS_SYMBOLS(SNAP_DECLARE)
#undef SNAP_DECLARE

#define vips_version snap_dl_vips_version
#define vips_init snap_dl_vips_init
#define vips_error_buffer_copy snap_dl_vips_error_buffer_copy
#define vips_cache_set_max snap_dl_vips_cache_set_max
#define vips_cache_set_max_mem snap_dl_vips_cache_set_max_mem
#define vips_cache_set_max_files snap_dl_vips_cache_set_max_files
#define vips_concurrency_set snap_dl_vips_concurrency_set
#define vips_operation_block_set snap_dl_vips_operation_block_set
#define vips_foreign_find_load_buffer snap_dl_vips_foreign_find_load_buffer
#define vips_image_new_from_buffer snap_dl_vips_image_new_from_buffer
#define vips_image_copy_memory snap_dl_vips_image_copy_memory
#define vips_image_get_typeof snap_dl_vips_image_get_typeof
#define vips_image_get_blob snap_dl_vips_image_get_blob
#define vips_image_get_int snap_dl_vips_image_get_int
#define vips_image_set_blob_copy snap_dl_vips_image_set_blob_copy
#define vips_image_get_width snap_dl_vips_image_get_width
#define vips_image_get_height snap_dl_vips_image_get_height
#define vips_image_get_bands snap_dl_vips_image_get_bands
#define vips_image_get_format snap_dl_vips_image_get_format
#define vips_image_get_interpretation snap_dl_vips_image_get_interpretation
#define vips_image_hasalpha snap_dl_vips_image_hasalpha
#define vips_copy snap_dl_vips_copy
#define vips_rot snap_dl_vips_rot
#define vips_flip snap_dl_vips_flip
#define vips_resize snap_dl_vips_resize
#define vips_shrink snap_dl_vips_shrink
#define vips_thumbnail_image snap_dl_vips_thumbnail_image
#define vips_extract_area snap_dl_vips_extract_area
#define vips_icc_transform snap_dl_vips_icc_transform
#define vips_colourspace snap_dl_vips_colourspace
#define vips_cast snap_dl_vips_cast
#define vips_linear1 snap_dl_vips_linear1
#define vips_bandjoin2 snap_dl_vips_bandjoin2
#define vips_array_double_new snap_dl_vips_array_double_new
#define vips_flatten snap_dl_vips_flatten
#define vips_area_unref snap_dl_vips_area_unref
#define vips_premultiply snap_dl_vips_premultiply
#define vips_unpremultiply snap_dl_vips_unpremultiply
#define vips_extract_band snap_dl_vips_extract_band
#define vips_bandjoin_const1 snap_dl_vips_bandjoin_const1
#define vips_jpegsave_buffer snap_dl_vips_jpegsave_buffer
#define vips_heifsave_buffer snap_dl_vips_heifsave_buffer
#define vips_image_write_to_memory snap_dl_vips_image_write_to_memory
#define vips_image_set_kill snap_dl_vips_image_set_kill
#define vips_image_new_from_memory_copy snap_dl_vips_image_new_from_memory_copy
#define g_free snap_dl_g_free
#define g_object_unref snap_dl_g_object_unref
#define g_log_set_handler snap_dl_g_log_set_handler

/* Why libvips could not be opened (snap_error_take reports it while libvips is not loaded). */
static char snap_load_error[512];
static int snap_vips_loaded = 0;

static int
snap_vips_open(void)
{
	void *handle = dlopen(SNAP_VIPS_SONAME, RTLD_NOW | RTLD_GLOBAL);
	if (!handle) {
		const char *why = dlerror();
		snprintf(snap_load_error, sizeof snap_load_error, "cannot open %s: %s (install libvips42)",
			SNAP_VIPS_SONAME, why ? why : "unknown error");
		return -1;
	}
#define SNAP_LOOKUP(name) \
	if (!(snap_dl_##name = (__typeof__(snap_dl_##name)) dlsym(handle, #name))) { \
		snprintf(snap_load_error, sizeof snap_load_error, "%s has no symbol %s", SNAP_VIPS_SONAME, #name); \
		return -1; \
	}
	SNAP_VIPS_SYMBOLS(SNAP_LOOKUP)
#undef SNAP_LOOKUP
	/* The manifest's recipe names the libvips SnapThumb was built against
	 * (snap_vips_version answers without loading it): refuse any other, rather
	 * than publish outputs under a recipe that is not true. */
	if (vips_version(0) != VIPS_MAJOR_VERSION || vips_version(1) != VIPS_MINOR_VERSION ||
		vips_version(2) != VIPS_MICRO_VERSION) {
		snprintf(snap_load_error, sizeof snap_load_error,
			"libvips %d.%d.%d is installed, but SnapThumb was built against %s: rebuild it",
			vips_version(0), vips_version(1), vips_version(2), VIPS_VERSION);
		return -1;
	}
	__atomic_store_n(&snap_vips_loaded, 1, __ATOMIC_RELEASE);
	return 0;
}


static volatile int snap_verbose = 0;
static volatile unsigned long snap_warnings = 0;

static void
snap_log_handler(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer user)
{
	(void) user;
	__atomic_add_fetch(&snap_warnings, 1, __ATOMIC_RELAXED);
	if (snap_verbose)
		fprintf(stderr, "snapthumb: libvips %s: %s\n", domain ? domain : "glib",
			message ? message : "");
	(void) level;
}

int
snap_init(const char *argv0, int vips_threads)
{
	if (!__atomic_load_n(&snap_vips_loaded, __ATOMIC_ACQUIRE) && snap_vips_open())
		return -1;
	if (vips_init(argv0 ? argv0 : "snapthumb"))
		return -1;
	/* The operation cache holds decoded images between jobs: off, memory stays flat. */
	vips_cache_set_max(0);
	vips_cache_set_max_mem(0);
	vips_cache_set_max_files(0);
	if (vips_threads > 0)
		vips_concurrency_set(vips_threads);
	/* Allowlist of loaders: block every loader, then unblock the accepted ones. */
	vips_operation_block_set("VipsForeignLoad", TRUE);
	vips_operation_block_set("VipsForeignLoadJpeg", FALSE);
	vips_operation_block_set("VipsForeignLoadPng", FALSE);
	vips_operation_block_set("VipsForeignLoadWebp", FALSE);
	vips_operation_block_set("VipsForeignLoadHeif", FALSE);
	vips_operation_block_set("VipsForeignLoadNsgif", FALSE);
	g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO,
		snap_log_handler, NULL);
	g_log_set_handler(NULL, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE, snap_log_handler, NULL);
	return 0;
}

const char *snap_vips_version(void) { return VIPS_VERSION; }
void snap_set_warnings_verbose(int verbose) { snap_verbose = verbose; }
unsigned long snap_warning_count(void) { return __atomic_load_n(&snap_warnings, __ATOMIC_RELAXED); }

char *
snap_error_take(void)
{
	if (!__atomic_load_n(&snap_vips_loaded, __ATOMIC_ACQUIRE))
		return snap_load_error[0] ? strdup(snap_load_error) : NULL;
	char *g = vips_error_buffer_copy();
	if (!g)
		return NULL;
	char *copy = strdup(g);
	g_free(g);
	return copy;
}

void snap_unref(VipsImage *image) { if (image) g_object_unref(image); }
void snap_g_free(void *p) { g_free(p); }

int snap_image_width(VipsImage *image) { return vips_image_get_width(image); }
int snap_image_height(VipsImage *image) { return vips_image_get_height(image); }
int snap_image_bands(VipsImage *image) { return vips_image_get_bands(image); }
int snap_image_has_alpha(VipsImage *image) { return vips_image_hasalpha(image); }
int snap_image_format(VipsImage *image) { return (int) vips_image_get_format(image); }
int snap_image_interpretation(VipsImage *image) { return (int) vips_image_get_interpretation(image); }

const char *
snap_find_loader(const void *buf, size_t len)
{
	return vips_foreign_find_load_buffer(buf, len);
}

int
snap_load(const void *buf, size_t len, const char *options, VipsImage **out)
{
	*out = vips_image_new_from_buffer(buf, len, options ? options : "", NULL);
	return *out ? 0 : -1;
}

int
snap_copy_memory(VipsImage *in, VipsImage **out)
{
	*out = vips_image_copy_memory(in);
	return *out ? 0 : -1;
}

int
snap_get_blob(VipsImage *in, const char *name, const void **data, size_t *len)
{
	if (!vips_image_get_typeof(in, name))
		return -1;
	return vips_image_get_blob(in, name, data, len);
}

int
snap_get_int(VipsImage *in, const char *name, int *value)
{
	if (!vips_image_get_typeof(in, name))
		return -1;
	return vips_image_get_int(in, name, value);
}

int
snap_with_profile(VipsImage *in, const void *profile, size_t len, VipsImage **out)
{
	if (vips_copy(in, out, NULL))
		return -1;
	vips_image_set_blob_copy(*out, VIPS_META_ICC_NAME, profile, len);
	return 0;
}

int
snap_rot(VipsImage *in, VipsImage **out, int degrees)
{
	VipsAngle angle;
	switch (degrees) {
	case 90: angle = VIPS_ANGLE_D90; break;
	case 180: angle = VIPS_ANGLE_D180; break;
	case 270: angle = VIPS_ANGLE_D270; break;
	default: angle = VIPS_ANGLE_D0; break;
	}
	return vips_rot(in, out, angle, NULL);
}

int snap_flip_horizontal(VipsImage *in, VipsImage **out)
{ return vips_flip(in, out, VIPS_DIRECTION_HORIZONTAL, NULL); }

int snap_resize(VipsImage *in, VipsImage **out, double scale)
{ return vips_resize(in, out, scale, NULL); }

int snap_shrink(VipsImage *in, VipsImage **out, double hshrink, double vshrink)
{ return vips_shrink(in, out, hshrink, vshrink, NULL); }

int
snap_thumbnail_image(VipsImage *in, VipsImage **out, int width, int height, int crop)
{
	return vips_thumbnail_image(in, out, width,
		"height", height,
		"size", VIPS_SIZE_BOTH,
		"crop", (VipsInteresting) crop,
		"no_rotate", TRUE,
		NULL);
}

int snap_extract_area(VipsImage *in, VipsImage **out, int left, int top, int width, int height)
{ return vips_extract_area(in, out, left, top, width, height, NULL); }

int
snap_icc_to_srgb(VipsImage *in, VipsImage **out, const char *input_profile, int embedded)
{
	if (input_profile)
		return vips_icc_transform(in, out, "srgb",
			"input_profile", input_profile,
			"embedded", embedded ? TRUE : FALSE,
			"intent", VIPS_INTENT_RELATIVE,
			"depth", 8,
			NULL);
	return vips_icc_transform(in, out, "srgb",
		"embedded", embedded ? TRUE : FALSE,
		"intent", VIPS_INTENT_RELATIVE,
		"depth", 8,
		NULL);
}

int snap_colourspace_srgb(VipsImage *in, VipsImage **out)
{ return vips_colourspace(in, out, VIPS_INTERPRETATION_sRGB, NULL); }

int snap_cast(VipsImage *in, VipsImage **out, int format)
{ return vips_cast(in, out, (VipsBandFormat) format, NULL); }

int snap_linear1(VipsImage *in, VipsImage **out, double a, double b)
{ return vips_linear1(in, out, a, b, NULL); }

int snap_bandjoin2(VipsImage *a, VipsImage *b, VipsImage **out)
{ return vips_bandjoin2(a, b, out, NULL); }

int
snap_flatten(VipsImage *in, VipsImage **out, double r, double g, double b)
{
	double values[3] = { r, g, b };
	VipsArrayDouble *background = vips_array_double_new(values, 3);
	int result = vips_flatten(in, out, "background", background, NULL);
	vips_area_unref(VIPS_AREA(background));
	return result;
}

int snap_premultiply(VipsImage *in, VipsImage **out) { return vips_premultiply(in, out, NULL); }
int snap_unpremultiply(VipsImage *in, VipsImage **out) { return vips_unpremultiply(in, out, NULL); }

int snap_extract_bands(VipsImage *in, VipsImage **out, int band, int n)
{ return vips_extract_band(in, out, band, "n", n, NULL); }

int snap_bandjoin_alpha255(VipsImage *in, VipsImage **out)
{ return vips_bandjoin_const1(in, out, 255.0, NULL); }

int
snap_jpegsave(VipsImage *in, void **buf, size_t *len, int quality, int optimize_coding, int subsample, int interlace,
              int restart_interval)
{
	return vips_jpegsave_buffer(in, buf, len,
		"Q", quality,
		"strip", TRUE,
		"optimize_coding", optimize_coding ? TRUE : FALSE,
		"interlace", interlace ? TRUE : FALSE,
		"subsample_mode", (VipsForeignSubsample) subsample,
		"restart_interval", restart_interval,
		NULL);
}

int
snap_heifsave(VipsImage *in, void **buf, size_t *len, int av1, int quality, int effort)
{
	/* 4:4:4, 8 bits, nothing but the pixels (the image comes from packed RGB
	 * and has no metadata; strip says so anyway). The encoder is named rather
	 * than "auto", so that another AV1 plugin installed later cannot change
	 * the bytes under the same recipe. */
	return vips_heifsave_buffer(in, buf, len,
		"Q", quality,
		"compression", av1 ? VIPS_FOREIGN_HEIF_COMPRESSION_AV1 : VIPS_FOREIGN_HEIF_COMPRESSION_HEVC,
		"encoder", av1 ? VIPS_FOREIGN_HEIF_ENCODER_AOM : VIPS_FOREIGN_HEIF_ENCODER_X265,
		"effort", effort,
		"subsample_mode", VIPS_FOREIGN_SUBSAMPLE_OFF,
		"bitdepth", 8,
		"lossless", FALSE,
		"strip", TRUE,
		NULL);
}

const char *
snap_heif_version(void)
{
	/* libheif is libvips' dependency, loaded with it (RTLD_GLOBAL): ask it. */
	if (!__atomic_load_n(&snap_vips_loaded, __ATOMIC_ACQUIRE))
		return NULL;
	const char *(*get)(void) = (const char *(*)(void)) dlsym(RTLD_DEFAULT, "heif_get_version");
	return get ? get() : NULL;
}

int
snap_write_memory(VipsImage *in, void **buf, size_t *len)
{
	void *g = vips_image_write_to_memory(in, len);
	if (!g)
		return -1;
	/* Hand back malloc'd memory so that Swift frees everything with snap_free. */
	void *copy = malloc(*len ? *len : 1);
	if (!copy) {
		g_free(g);
		return -1;
	}
	memcpy(copy, g, *len);
	g_free(g);
	*buf = copy;
	return 0;
}

void snap_kill(VipsImage *image) { if (image) vips_image_set_kill(image, TRUE); }

int
snap_from_memory(const void *pixels, int width, int height, int bands, int cmyk, VipsImage **out)
{
	VipsImage *im = vips_image_new_from_memory_copy(pixels, (size_t) width * height * bands,
		width, height, bands, VIPS_FORMAT_UCHAR);
	if (!im)
		return -1;
	im->Type = cmyk ? VIPS_INTERPRETATION_CMYK : bands == 1 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;
	*out = im;
	return 0;
}

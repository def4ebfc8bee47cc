#define _GNU_SOURCE 1
#include "snapshim.h"

#include <stdlib.h>
#include <malloc.h>
#include <unistd.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <errno.h>
#include <string.h>
#include <libexif/exif-data.h>
#include <libimagequant.h>
#include <zlib.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>
#include <openssl/evp.h>
#include <math.h>
#include <dlfcn.h>
#include <stdio.h>

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
	X(vips_jpegsave_buffer) X(vips_image_write_to_memory) X(vips_image_set_kill) \
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

/* libgomp is linked through libimagequant; its header is not always installed. */
extern void omp_set_num_threads(int n);

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

void snap_free(void *p) { free(p); }
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
snap_jpegsave(VipsImage *in, void **buf, size_t *len, int quality, int optimize_coding, int subsample, int interlace)
{
	return vips_jpegsave_buffer(in, buf, len,
		"Q", quality,
		"strip", TRUE,
		"optimize_coding", optimize_coding ? TRUE : FALSE,
		"interlace", interlace ? TRUE : FALSE,
		"subsample_mode", (VipsForeignSubsample) subsample,
		NULL);
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
snap_exif_orientation(const void *exif, size_t len)
{
	if (!exif || len < 6)
		return 0;
	ExifData *data = exif_data_new();
	if (!data)
		return 0;
	exif_data_unset_option(data, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
	exif_data_load_data(data, exif, (unsigned int) len);
	int orientation = 0;
	ExifEntry *entry = exif_content_get_entry(data->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
	if (entry && entry->format == EXIF_FORMAT_SHORT && entry->components >= 1 && entry->data &&
		entry->size >= 2)
		orientation = exif_get_short(entry->data, exif_data_get_byte_order(data));
	exif_data_unref(data);
	return orientation;
}

/* OpenSSL's SHA-256 uses the CPU's SHA extensions where it has them: about ten
 * times GLib's g_checksum here, which mattered for 2-3 MB camera originals (every
 * input is hashed for its manifest's source digest). The digest is the same. */
void
snap_sha256(const void *data, size_t len, unsigned char out[32])
{
	unsigned int out_len = 32;
	/* Only an allocation failure inside OpenSSL can fail this: a wrong content
	 * address would be worse than stopping (a worker that dies is retried). */
	if (EVP_Digest(data, len, out, &out_len, EVP_sha256(), NULL) != 1)
		abort();
}

int
snap_quantize_palette(const unsigned char *rgba, int width, int height, int max_colours,
                      int speed, unsigned char *palette, int *count)
{
	omp_set_num_threads(1);
	liq_attr *attr = liq_attr_create();
	if (!attr)
		return -1;
	int result = -1;
	liq_image *image = NULL;
	liq_result *quant = NULL;
	if (liq_set_max_colors(attr, max_colours) != LIQ_OK)
		goto done;
	if (liq_set_speed(attr, speed) != LIQ_OK)
		goto done;
	image = liq_image_create_rgba(attr, rgba, width, height, 0);
	if (!image)
		goto done;
	if (liq_image_quantize(image, attr, &quant) != LIQ_OK)
		goto done;
	liq_set_dithering_level(quant, 0);
	/* The palette is only final after a remap; the remapped pixels are not used
	 * (the Swift side maps pixels itself, so adaptive and fixed palettes share one path). */
	size_t n = (size_t) width * height;
	unsigned char *scratch = malloc(n ? n : 1);
	if (!scratch)
		goto done;
	liq_write_remapped_image(quant, image, scratch, n);
	free(scratch);
	const liq_palette *pal = liq_get_palette(quant);
	*count = (int) pal->count;
	for (unsigned int i = 0; i < pal->count; i++) {
		palette[i * 4 + 0] = pal->entries[i].r;
		palette[i * 4 + 1] = pal->entries[i].g;
		palette[i * 4 + 2] = pal->entries[i].b;
		palette[i * 4 + 3] = pal->entries[i].a;
	}
	result = 0;
done:
	if (quant)
		liq_result_destroy(quant);
	if (image)
		liq_image_destroy(image);
	liq_attr_destroy(attr);
	return result;
}

const char *snap_liq_version(void) { return LIQ_VERSION_STRING; }

unsigned long snap_crc32(unsigned long crc, const void *data, size_t len)
{ return crc32(crc, data, (uInt) len); }

size_t snap_deflate_bound(size_t in_len) { return compressBound((uLong) in_len); }

int
snap_deflate(const void *in, size_t in_len, int level, int strategy, void *out, size_t *out_len)
{
	z_stream s;
	memset(&s, 0, sizeof s);
	/* The smallest window that still reaches back over the whole input (zlib keeps
	 * 262 bytes of lookahead), so the matches found are the same as with 32 KiB;
	 * setting up the default 32 KiB window and 128 KiB hash for a 5 KB palette PNG
	 * cost more than compressing it. */
	int bits = 9;
	while (bits < 15 && ((size_t) 1 << bits) < in_len + 262) bits++;
	if (deflateInit2(&s, level, Z_DEFLATED, bits, 8, strategy) != Z_OK)
		return -1;
	s.next_in = (Bytef *) in;
	s.avail_in = (uInt) in_len;
	s.next_out = out;
	s.avail_out = (uInt) *out_len;
	int r = deflate(&s, Z_FINISH);
	*out_len = s.total_out;
	deflateEnd(&s);
	return r == Z_STREAM_END ? 0 : -1;
}

const char *snap_zlib_version(void) { return zlibVersion(); }

/* libexif has no version call: Package.swift reads the version from libexif.pc at build time. */
#ifndef SNAP_LIBEXIF_VERSION
#define SNAP_LIBEXIF_VERSION "unknown"
#endif
const char *snap_exif_version(void) { return SNAP_LIBEXIF_VERSION; }

#define SNAP_STRINGIFY_(x) #x
#define SNAP_STRINGIFY(x) SNAP_STRINGIFY_(x)
const char *snap_jpeg_version(void)
{
#ifdef LIBJPEG_TURBO_VERSION
	return SNAP_STRINGIFY(LIBJPEG_TURBO_VERSION);
#else
	return SNAP_STRINGIFY(JPEG_LIB_VERSION);
#endif
}

struct snap_jpeg_error {
	struct jpeg_error_mgr pub;
	jmp_buf jump;
};

static void
snap_jpeg_error_exit(j_common_ptr cinfo)
{
	struct snap_jpeg_error *err = (struct snap_jpeg_error *) cinfo->err;
	longjmp(err->jump, 1);
}

static void snap_jpeg_silent(j_common_ptr cinfo, int level) { (void) cinfo; (void) level; }

/* Natural (row-major) order. */
static const unsigned int snap_robidoux_table[64] = {
	16, 16, 16, 18, 25, 37, 56, 85,
	16, 17, 20, 27, 34, 40, 53, 75,
	16, 20, 24, 31, 43, 62, 91, 135,
	18, 27, 31, 40, 53, 74, 106, 156,
	25, 34, 43, 53, 69, 94, 131, 189,
	37, 40, 62, 74, 94, 124, 169, 238,
	56, 53, 91, 106, 131, 169, 226, 311,
	85, 75, 135, 156, 189, 238, 311, 418,
};

int
snap_jpeg_encode_rgb(const unsigned char *rgb, int width, int height, int quality,
                     int optimize_coding, int subsample, unsigned char **out, size_t *out_len)
{
	struct jpeg_compress_struct cinfo;
	struct snap_jpeg_error jerr;
	unsigned char *buffer = NULL;
	unsigned long length = 0;

	cinfo.err = jpeg_std_error(&jerr.pub);
	jerr.pub.error_exit = snap_jpeg_error_exit;
	jerr.pub.emit_message = snap_jpeg_silent;
	if (setjmp(jerr.jump)) {
		jpeg_destroy_compress(&cinfo);
		free(buffer);
		return -1;
	}
	jpeg_create_compress(&cinfo);
	jpeg_mem_dest(&cinfo, &buffer, &length);
	cinfo.image_width = (JDIMENSION) width;
	cinfo.image_height = (JDIMENSION) height;
	cinfo.input_components = 3;
	cinfo.in_color_space = JCS_RGB;
	jpeg_set_defaults(&cinfo);
	/* One quantisation table for all three components: N. Robidoux's table
	 * (ImageMagick's, mozjpeg's default), scaled by quality as libjpeg scales
	 * its own. At 100 px and 4:4:4 it scored +6 to +7 SSIMULACRA2 over libjpeg's
	 * Annex K luma + chroma pair at equal bytes (README: Quality per byte). */
	jpeg_add_quant_table(&cinfo, 0, snap_robidoux_table, jpeg_quality_scaling(quality), TRUE);
	for (int c = 0; c < 3; c++) cinfo.comp_info[c].quant_tbl_no = 0;
	cinfo.optimize_coding = optimize_coding ? TRUE : FALSE;
	cinfo.write_JFIF_header = FALSE;
	cinfo.write_Adobe_marker = FALSE;
	/* One chroma layout at every quality (libvips' "auto" switches from 4:2:0
	 * to 4:4:4 at 90, which makes size jump by a third between 89 and 90 and
	 * defeats the budget search's interpolation). subsample 2 is 4:2:0, 1 is
	 * 4:4:4 (SnapThumb's default: better at equal bytes on 100 px squares). */
	int factor = subsample == 2 ? 2 : 1;
	cinfo.comp_info[0].h_samp_factor = factor;
	cinfo.comp_info[0].v_samp_factor = factor;
	cinfo.comp_info[1].h_samp_factor = 1;
	cinfo.comp_info[1].v_samp_factor = 1;
	cinfo.comp_info[2].h_samp_factor = 1;
	cinfo.comp_info[2].v_samp_factor = 1;
	jpeg_start_compress(&cinfo, TRUE);
	size_t stride = (size_t) width * 3;
	while (cinfo.next_scanline < cinfo.image_height) {
		JSAMPROW row = (JSAMPROW) (rgb + cinfo.next_scanline * stride);
		jpeg_write_scanlines(&cinfo, &row, 1);
	}
	jpeg_finish_compress(&cinfo);
	jpeg_destroy_compress(&cinfo);
	*out = buffer;
	*out_len = length;
	return 0;
}

int snap_syncfs(int fd) { return syncfs(fd); }

int
snap_get_affinity(int tid, unsigned char *cpus, int count)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(tid, sizeof set, &set) != 0)
		return -1;
	int n = count < CPU_SETSIZE ? count : CPU_SETSIZE;
	for (int i = 0; i < n; i++)
		cpus[i] = CPU_ISSET(i, &set) ? 1 : 0;
	return n;
}

int
snap_set_affinity(int tid, const unsigned char *cpus, int count)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int i = 0; i < count && i < CPU_SETSIZE; i++)
		if (cpus[i])
			CPU_SET(i, &set);
	return sched_setaffinity(tid, sizeof set, &set);
}

/* Lanczos3 weights for one output coordinate: taps from *first, *count of them,
 * normalised to sum 1. `scale` is output/input; the kernel widens by 1/scale when
 * shrinking so that every input pixel contributes (no aliasing). */
static double
snap_lanczos3(double x)
{
	if (x == 0.0) return 1.0;
	if (x <= -3.0 || x >= 3.0) return 0.0;
	double px = M_PI * x;
	return 3.0 * sin(px) * sin(px / 3.0) / (px * px);
}

static int
snap_weights(int out_len, int in_len, double scale, double offset, int *first, int *count, float **weights, int *max_taps)
{
	double support = scale < 1.0 ? 3.0 / scale : 3.0;
	double stretch = scale < 1.0 ? scale : 1.0;
	int taps = (int) ceil(2.0 * support) + 1;
	float *w = malloc(sizeof(float) * (size_t) out_len * (size_t) taps);
	if (!w) return -1;
	for (int i = 0; i < out_len; i++) {
		double centre = (i + offset + 0.5) / scale - 0.5;
		int start = (int) floor(centre - support) + 1;
		double sum = 0.0;
		for (int k = 0; k < taps; k++) {
			double v = snap_lanczos3((start + k - centre) * stretch);
			w[i * taps + k] = (float) v;
			sum += v;
		}
		for (int k = 0; k < taps; k++) w[i * taps + k] = (float) (w[i * taps + k] / sum);
		first[i] = start;
		count[i] = taps;
	}
	*weights = w;
	*max_taps = taps;
	return 0;
}

/* Moves the weight of taps outside 0..len-1 onto the edge pixel (what clamping
 * the index would read) and trims them, so the loops below never clamp. */
static int
snap_fold_edges(int n, int len, int taps, int *first, int *count, float *w)
{
	float *folded = malloc(sizeof(float) * (size_t) taps);
	if (!folded) return -1;
	for (int i = 0; i < n; i++) {
		float *wi = w + (size_t) i * taps;
		int start = first[i], lo = start < 0 ? 0 : start;
		int hi = start + count[i] - 1 < len - 1 ? start + count[i] - 1 : len - 1;
		int m = hi - lo + 1;
		for (int j = 0; j < m; j++) folded[j] = 0;
		for (int k = 0; k < count[i]; k++) {
			int at = start + k;
			at = at < lo ? lo : at > hi ? hi : at;
			folded[at - lo] += wi[k];
		}
		for (int j = 0; j < m; j++) wi[j] = folded[j];
		first[i] = lo;
		count[i] = m;
	}
	free(folded);
	return 0;
}

int
snap_square_rgb(const unsigned char *rgb, int width, int height, int side, unsigned char *out)
{
	/* The exact centre square, offsets in output pixels and not rounded:
	 * libvips' thumbnail rounds the scaled size and the crop's offset to whole
	 * pixels, which shifts the square by up to a pixel against the photo's
	 * true centre (and against a full-resolution reference). */
	double scale = fmax((double) side / width, (double) side / height);
	double left = (width * scale - side) / 2, top = (height * scale - side) / 2;
	if (left < 0) left = 0;
	if (top < 0) top = 0;

	int *xf = malloc(sizeof(int) * side * 2), *yf = malloc(sizeof(int) * side * 2);
	float *xw = NULL, *yw = NULL, *cols = NULL;
	int xt = 0, yt = 0, status = -1;
	if (!xf || !yf) goto done;
	if (snap_weights(side, width, scale, left, xf, xf + side, &xw, &xt) ||
	    snap_weights(side, height, scale, top, yf, yf + side, &yw, &yt))
		goto done;
	if (snap_fold_edges(side, width, xt, xf, xf + side, xw) ||
	    snap_fold_edges(side, height, yt, yf, yf + side, yw))
		goto done;

	/* Only the columns the crop reads. */
	int c0 = xf[0], c1 = xf[side - 1] + xf[2 * side - 1] - 1;
	for (int x = 0; x < side; x++) {
		if (xf[x] < c0) c0 = xf[x];
		if (xf[x] + xf[side + x] - 1 > c1) c1 = xf[x] + xf[side + x] - 1;
	}
	size_t span = (size_t) (c1 - c0 + 1) * 3;
	/* Vertical pass first: each output row is a weighted sum of whole input row
	 * spans, a contiguous loop the compiler vectorises. side × span floats. */
	cols = malloc(sizeof(float) * (size_t) side * span);
	if (!cols) goto done;
	for (int y = 0; y < side; y++) {
		float *acc = cols + (size_t) y * span;
		const float *w = yw + (size_t) y * yt;
		for (size_t i = 0; i < span; i++) acc[i] = 0;
		for (int k = 0; k < yf[side + y]; k++) {
			const unsigned char *src = rgb + ((size_t) (yf[y] + k) * width + c0) * 3;
			float wk = w[k];
			for (size_t i = 0; i < span; i++) acc[i] += wk * (float) src[i];
		}
	}
	/* Horizontal pass on side rows. */
	for (int y = 0; y < side; y++) {
		const float *row = cols + (size_t) y * span;
		unsigned char *dst = out + (size_t) y * side * 3;
		for (int x = 0; x < side; x++) {
			const float *w = xw + (size_t) x * xt;
			const float *p = row + (size_t) (xf[x] - c0) * 3;
			float r = 0, g = 0, b = 0;
			for (int k = 0; k < xf[side + x]; k++) {
				r += w[k] * p[k * 3]; g += w[k] * p[k * 3 + 1]; b += w[k] * p[k * 3 + 2];
			}
			long q;
			q = lrintf(r); dst[x * 3] = (unsigned char) (q < 0 ? 0 : q > 255 ? 255 : q);
			q = lrintf(g); dst[x * 3 + 1] = (unsigned char) (q < 0 ? 0 : q > 255 ? 255 : q);
			q = lrintf(b); dst[x * 3 + 2] = (unsigned char) (q < 0 ? 0 : q > 255 ? 255 : q);
		}
	}
	status = 0;
done:
	free(xf); free(yf); free(xw); free(yw); free(cols);
	return status;
}

void
snap_fix_mmap_threshold(int bytes)
{
	mallopt(M_MMAP_THRESHOLD, bytes);
}

int
snap_die_with_parent(void)
{
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* The parent may have died before the call: then it has been reparented. */
	return getppid() != parent || parent == 1;
}

int
snap_rename_noreplace(const char *from, const char *to)
{
#ifdef SYS_renameat2
	if (syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 1 /* RENAME_NOREPLACE */) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
#endif
	struct stat st;
	if (lstat(to, &st) == 0) {
		errno = EEXIST;
		return -1;
	}
	return rename(from, to);
}

void
snap_oom_first(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	(void) !write(fd, "1000", 4);
	close(fd);
}

/* ---- JPEG decoding straight with libjpeg ----
 * The same library, scale factor and defaults as libvips' jpegload with
 * shrink (its output is byte-identical, cropped the same way), without a
 * libvips pipeline and its thread hand-offs around the decoder. */

struct snap_jpeg {
	struct jpeg_decompress_struct cinfo;
	struct jpeg_error_mgr pub;
	struct jpeg_progress_mgr progress;
	jmp_buf jump;
	int fail_on;                 /* VipsFailOn: 0 none, 1 truncated, 2 error, 3 warning */
	volatile int killed;
	char message[JMSG_LENGTH_MAX + 32];
	const unsigned char *exif;   /* into libjpeg's saved markers */
	size_t exif_len;
	unsigned char *icc;          /* assembled from APP2 chunks (malloc) */
	size_t icc_len;
};

static void
snap_jpeg_fail(j_common_ptr cinfo)
{
	struct snap_jpeg *j = (struct snap_jpeg *) cinfo->client_data;
	(*cinfo->err->format_message)(cinfo, j->message);
	longjmp(j->jump, 1);
}

/* Warnings (level -1) decide by fail_on, as libvips does: truncation fails at
 * "truncated" and above, any other warning at "warning"; a hundred warnings
 * always fail (a corrupt file can otherwise warn for every block). */
static void
snap_jpeg_message(j_common_ptr cinfo, int level)
{
	struct snap_jpeg *j = (struct snap_jpeg *) cinfo->client_data;
	if (level >= 0)
		return;
	long count = ++cinfo->err->num_warnings;
	int truncated = cinfo->err->msg_code == JWRN_JPEG_EOF;
	if ((truncated && j->fail_on >= 1) || j->fail_on >= 3 || count >= 100)
		snap_jpeg_fail(cinfo);
}

/* Fails the current call (open or decode) with `message`. */
static void __attribute__((noreturn))
snap_jpeg_stop(struct snap_jpeg *j, const char *message)
{
	snprintf(j->message, sizeof(j->message), "%s", message);
	longjmp(j->jump, 1);
}

/* More scans than any encoder writes: a progressive file built to make the
 * decoder re-read its coefficients over and over (a scan bomb). */
#define SNAP_JPEG_MAX_SCANS 256
#define SNAP_STR2(x) #x
#define SNAP_STR(x) SNAP_STR2(x)

/* Called by libjpeg while it works, also inside jpeg_start_decompress, where a
 * progressive file reads all its scans before the first row comes out: the kill
 * flag and the scan limit are checked there too. */
static void
snap_jpeg_progress(j_common_ptr cinfo)
{
	struct snap_jpeg *j = (struct snap_jpeg *) cinfo->client_data;
	if (__atomic_load_n(&j->killed, __ATOMIC_RELAXED))
		snap_jpeg_stop(j, "killed");
	if (j->cinfo.input_scan_number > SNAP_JPEG_MAX_SCANS)
		snap_jpeg_stop(j, "more than " SNAP_STR(SNAP_JPEG_MAX_SCANS) " scans (a progressive JPEG built to stall decoders)");
}

/* The ICC profile is split over APP2 "ICC_PROFILE\0" markers numbered from 1:
 * join the run that starts at 1 (as libvips does, missing chunks end it). */
static void
snap_jpeg_collect(struct snap_jpeg *j)
{
	enum { MAX_CHUNKS = 256 };
	const unsigned char *chunk[MAX_CHUNKS] = { 0 };
	size_t length[MAX_CHUNKS] = { 0 };
	for (jpeg_saved_marker_ptr m = j->cinfo.marker_list; m; m = m->next) {
		if (m->marker == JPEG_APP0 + 1 && !j->exif && m->data_length > 4 &&
			memcmp(m->data, "Exif", 4) == 0) {
			j->exif = m->data;
			j->exif_len = m->data_length;
		}
		else if (m->marker == JPEG_APP0 + 2 && m->data_length > 14 &&
			memcmp(m->data, "ICC_PROFILE", 12) == 0) {
			int seq = m->data[12];
			if (seq >= 1 && seq <= MAX_CHUNKS && !chunk[seq - 1]) {
				chunk[seq - 1] = m->data + 14;
				length[seq - 1] = m->data_length - 14;
			}
		}
	}
	size_t total = 0;
	int n = 0;
	while (n < MAX_CHUNKS && chunk[n])
		total += length[n++];
	if (total == 0 || !(j->icc = malloc(total)))
		return;
	for (int i = 0, at = 0; i < n; at += length[i], i++)
		memcpy(j->icc + at, chunk[i], length[i]);
	j->icc_len = total;
}

int
snap_jpeg_open(const void *buf, size_t len, int fail_on, snap_jpeg **out, snap_jpeg_info *info)
{
	struct snap_jpeg *j = calloc(1, sizeof(*j));
	*out = j;
	if (!j)
		return -1;
	j->fail_on = fail_on;
	j->cinfo.err = jpeg_std_error(&j->pub);
	j->pub.error_exit = snap_jpeg_fail;
	j->pub.emit_message = snap_jpeg_message;
	j->cinfo.client_data = j;
	if (setjmp(j->jump))
		return -1;
	jpeg_create_decompress(&j->cinfo);
	j->progress.progress_monitor = snap_jpeg_progress;
	j->cinfo.progress = &j->progress;
	jpeg_mem_src(&j->cinfo, (const unsigned char *) buf, (unsigned long) len);
	jpeg_save_markers(&j->cinfo, JPEG_APP0 + 1, 0xFFFF);
	jpeg_save_markers(&j->cinfo, JPEG_APP0 + 2, 0xFFFF);
	jpeg_read_header(&j->cinfo, TRUE);
	snap_jpeg_collect(j);
	info->width = (int) j->cinfo.image_width;
	info->height = (int) j->cinfo.image_height;
	info->components = j->cinfo.num_components;
	info->colour_space = (int) j->cinfo.jpeg_color_space;
	info->multiscan = jpeg_has_multiple_scans(&j->cinfo) ? 1 : 0;
	info->exif = j->exif;
	info->exif_len = j->exif_len;
	info->icc = j->icc;
	info->icc_len = j->icc_len;
	return 0;
}

int
snap_jpeg_decode(snap_jpeg *j, int shrink, unsigned char **out, int *width, int *height, int *bands, int *cmyk)
{
	unsigned char *volatile pixels = NULL;
	JSAMPROW *volatile rows = NULL;
	*out = NULL;
	/* Every failure, libjpeg's or ours, comes back here with j->message set. */
	if (setjmp(j->jump)) {
		free(pixels);
		free(rows);
		return -1;
	}
	struct jpeg_decompress_struct *c = &j->cinfo;
	c->scale_num = 1;
	c->scale_denom = (unsigned int) shrink;
	switch (c->jpeg_color_space) {
	case JCS_GRAYSCALE: c->out_color_space = JCS_GRAYSCALE; break;
	case JCS_CMYK: case JCS_YCCK: c->out_color_space = JCS_CMYK; break;
	case JCS_YCbCr: case JCS_RGB: c->out_color_space = JCS_RGB; break;
	default:
		snap_jpeg_stop(j, "unsupported JPEG colour space");
	}
	jpeg_start_decompress(c);
	/* libvips rounds a shrunk size down; libjpeg up. Keep libvips' size. */
	int w = (int) (c->image_width / (unsigned) shrink), h = (int) (c->image_height / (unsigned) shrink);
	int n = c->output_components;
	if (w < 1 || h < 1 || w > (int) c->output_width || h > (int) c->output_height)
		snap_jpeg_stop(j, "image too small for this shrink");
	size_t stride = (size_t) c->output_width * n;
	/* Whole output rows (libjpeg writes its full width), the spare row at the end
	 * takes any row past the kept height. */
	pixels = malloc(stride * ((size_t) h + 1));
	rows = malloc(sizeof(JSAMPROW) * (size_t) c->rec_outbuf_height);
	if (!pixels || !rows)
		snap_jpeg_stop(j, "out of memory");
	/* The kill flag is checked by the progress monitor on every call. */
	while (c->output_scanline < (JDIMENSION) h) {
		for (int i = 0; i < c->rec_outbuf_height; i++) {
			size_t y = c->output_scanline + (size_t) i;
			rows[i] = pixels + stride * (y < (size_t) h ? y : (size_t) h);
		}
		jpeg_read_scanlines(c, rows, (JDIMENSION) c->rec_outbuf_height);
	}
	/* Pack to the kept width. */
	if ((int) c->output_width != w)
		for (int y = 1; y < h; y++)
			memmove(pixels + (size_t) y * w * n, pixels + (size_t) y * stride, (size_t) w * n);
	/* Adobe (Photoshop) writes CMYK inverted: 0 is full ink. */
	if (c->out_color_space == JCS_CMYK && c->saw_Adobe_marker)
		for (size_t i = 0, count = (size_t) w * h * n; i < count; i++)
			pixels[i] = (unsigned char) (255 - pixels[i]);
	free(rows);
	*out = pixels;
	*width = w;
	*height = h;
	*bands = n;
	*cmyk = c->out_color_space == JCS_CMYK;
	return 0;
}

const char *snap_jpeg_message_text(snap_jpeg *j) { return j ? j->message : "out of memory"; }
void snap_jpeg_kill(snap_jpeg *j) { if (j) __atomic_store_n(&j->killed, 1, __ATOMIC_RELAXED); }

void
snap_jpeg_close(snap_jpeg *j)
{
	if (!j)
		return;
	jpeg_destroy_decompress(&j->cinfo);
	free(j->icc);
	free(j);
}

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

void
snap_orient_rgb(const unsigned char *rgb, int width, int height, int rotate, int flip, unsigned char *out)
{
	int swap = rotate == 90 || rotate == 270;
	int ow = swap ? height : width, oh = swap ? width : height;

	for (int y = 0; y < oh; y++) {
		unsigned char *row = out + (size_t) y * ow * 3;
		for (int x = 0; x < ow; x++) {
			/* The rotated image's pixel shown at (x, y) after the flip. */
			int rx = flip ? ow - 1 - x : x, sx, sy;
			switch (rotate) {
			case 90: sx = y; sy = height - 1 - rx; break;
			case 180: sx = width - 1 - rx; sy = height - 1 - y; break;
			case 270: sx = width - 1 - y; sy = rx; break;
			default: sx = rx; sy = y; break;
			}
			const unsigned char *p = rgb + ((size_t) sy * width + sx) * 3;
			row[x * 3] = p[0];
			row[x * 3 + 1] = p[1];
			row[x * 3 + 2] = p[2];
		}
	}
}

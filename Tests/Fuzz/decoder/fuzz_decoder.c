/* Differential libFuzzer target for SnapThumb's own JPEG decoding (issue 41, item 3).
 *
 * Each input is decoded by Sources/CJPEGShim's decoder twice: the way the program
 * decodes (our Huffman decoder, jpeg_entropy.c, and the paired IDCTs, jpeg_idct.c,
 * wherever they take the file) and with snap_jpeg_libjpeg_entropy (libjpeg-turbo
 * alone: its Huffman decoder, its IDCTs). Both must agree exactly: the same
 * refusal with the same message, or the same size and the same pixels. This at
 * every scale the program decodes at (1/1, 1/2, 1/4, 1/8), whole and as the
 * centre region DecodeStep asks for (DecodeStep.centreRegion), at fail_on none,
 * truncated and warning. The region must also be that rectangle of the whole decode
 * (what JPEGDecoder.decodePixels promises), but for the exceptions below.
 *
 * Not compared, only counted (docs/performance.md, "The decoder against libjpeg-turbo"):
 *  - inputs whose entropy-coded data holds two or more 0xFF bytes before a stuffed
 *    zero (FF FF 00): fill bytes, which the spec allows before any marker; our
 *    decoder skips them and reads the 0xFF data byte, libjpeg-turbo's fast path
 *    takes the second 0xFF for a marker and decodes the rest differently
 *    (Tests/Fuzz/decoder-known/fill-ff.jpg);
 *  - a region's first and last columns against the whole decode, in horizontally
 *    subsampled files at 1/1, 1/2 and 1/4: libjpeg-turbo's fancy upsampling
 *    treats the cropped edge as the image's edge (a few levels apart);
 *  - the whole region against the whole decode where libjpeg-turbo 2.1 crops a
 *    component decoded with a larger IDCT that it still upsamples (4:1:0 at 1/2 and
 *    1/4: Tests/Fuzz/decoder-known/crop-4x2.jpg): a libjpeg-turbo bug, see
 *    crop_scaled_upsampling;
 *  - the region against the whole decode in a progressive file whose scans leave
 *    coefficients incomplete (damaged or cut short, decoded at fail_on none):
 *    libjpeg's block smoothing, which reads neighbouring blocks' DC values, sees
 *    other neighbours in the region's first and last two block columns
 *    (Tests/Fuzz/decoder-known/progressive-smoothing.jpg).
 * Both ways of decoding agree on all four; SNAP_FUZZ_STRICT=1 fails on them too
 * (to show the difference on a reproducer).
 *
 * Any difference aborts (libFuzzer keeps the input as an artifact); so does any
 * ASan or UBSan report. Built and run by Scripts/fuzz-decoder.sh. */
#include "jpegshim.h"
#include "kernelshim.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>

/* Larger images are skipped (counted): the fuzzer's time goes to many inputs. */
#define MAX_PIXELS (1L << 22)
/* DecodeStep: min(square side, 4 × pixel grid) with the default settings. */
#define SMALLEST_SIDE 100

static long stat_inputs, stat_header_refused, stat_large, stat_fill, stat_compared, stat_own_used,
	stat_refused, stat_region_edge, stat_crop_bug, stat_smoothing;
static int strict;

struct decoded {
	int status;                 /* 0 decoded, -1 refused */
	char message[200];
	unsigned char *pixels;
	int width, height, bands, cmyk;
	int region[4];
	int own;                    /* our Huffman decoder did the decoding */
};

static void
decoded_free(struct decoded *d)
{
	free(d->pixels);
	d->pixels = NULL;
}

/* One decode of a fresh handle, as JPEGDecoder.decodePixels does it. */
static void
decode(const uint8_t *data, size_t size, int fail_on, int reference, int shrink, const int *region, struct decoded *d)
{
	memset(d, 0, sizeof(*d));
	snap_jpeg *j = NULL;
	snap_jpeg_info info;
	size_t capacity = 0;
	d->status = -1;
	if (snap_jpeg_open(data, size, fail_on, &j, &info) == 0) {
		if (reference)
			snap_jpeg_libjpeg_entropy(j);
		if (snap_jpeg_decode_capacity(j, shrink, &capacity) == 0 && (d->pixels = malloc(capacity ? capacity : 1))) {
			if (region)
				memcpy(d->region, region, sizeof(d->region));
			d->status = snap_jpeg_decode_into(j, shrink, d->pixels, capacity, &d->width, &d->height, &d->bands,
			                                  &d->cmyk, region ? d->region : NULL);
			d->own = snap_jpeg_entropy_used(j);
		}
	}
	snprintf(d->message, sizeof(d->message), "%s", d->status == 0 ? "" : snap_jpeg_message_text(j));
	if (d->status != 0)
		decoded_free(d);
	snap_jpeg_close(j);
}

static void __attribute__((noreturn))
differ(const char *what, int fail_on, int shrink, const int *region, const char *detail)
{
	fprintf(stderr, "fuzz-decoder: DIFFERENCE (%s) at fail_on %d, 1/%d", what, fail_on, shrink);
	if (region)
		fprintf(stderr, ", region x %d y %d w %d h %d", region[0], region[1], region[2], region[3]);
	fprintf(stderr, ": %s\n", detail);
	abort();
}

/* The same outcome: the same refusal, or the same pixels. */
static void
compare(const struct decoded *own, const struct decoded *ref, int fail_on, int shrink, const int *region)
{
	char detail[600];
	if (own->status != ref->status || strcmp(own->message, ref->message) != 0) {
		snprintf(detail, sizeof(detail), "ours %s \"%s\", libjpeg-turbo's %s \"%s\"",
		         own->status ? "refused" : "decoded", own->message, ref->status ? "refused" : "decoded", ref->message);
		differ("outcome", fail_on, shrink, region, detail);
	}
	if (own->status != 0)
		return;
	if (own->width != ref->width || own->height != ref->height || own->bands != ref->bands || own->cmyk != ref->cmyk ||
	    memcmp(own->region, ref->region, sizeof(own->region)) != 0) {
		snprintf(detail, sizeof(detail), "ours %dx%dx%d (region %d,%d %dx%d), libjpeg-turbo's %dx%dx%d (region %d,%d %dx%d)",
		         own->width, own->height, own->bands, own->region[0], own->region[1], own->region[2], own->region[3],
		         ref->width, ref->height, ref->bands, ref->region[0], ref->region[1], ref->region[2], ref->region[3]);
		differ("size", fail_on, shrink, region, detail);
	}
	size_t count = (size_t) own->width * own->height * own->bands;
	for (size_t i = 0; i < count; i++)
		if (own->pixels[i] != ref->pixels[i]) {
			size_t pixel = i / own->bands;
			snprintf(detail, sizeof(detail), "first at x %zu y %zu band %zu: ours %d, libjpeg-turbo's %d (our Huffman decoder %s)",
			         pixel % own->width, pixel / own->width, i % own->bands, own->pixels[i], ref->pixels[i],
			         own->own ? "used" : "not used");
			differ("pixels", fail_on, shrink, region, detail);
		}
}

/* How the region's pixels compare with that rectangle of the whole decode: 0 the
 * same, 1 only in its first or last column (fancy upsampling's edge), 2 elsewhere too. */
static int
region_against_whole(const struct decoded *part, const struct decoded *whole)
{
	if (part->status != 0 || whole->status != 0)
		return 0;  /* refusals: compared by the caller */
	int left = part->region[0], top = part->region[1], n = part->bands, w = part->width;
	if (left + w > whole->width || top + part->height > whole->height || n != whole->bands)
		return 2;
	int worst = 0;
	for (int y = 0; y < part->height && worst < 2; y++) {
		const unsigned char *a = part->pixels + (size_t) y * w * n;
		const unsigned char *b = whole->pixels + ((size_t) (top + y) * whole->width + left) * n;
		if (memcmp(a, b, (size_t) w * n) == 0)
			continue;
		worst = 1;
		if (w > 2 && memcmp(a + n, b + n, (size_t) (w - 2) * n) != 0)
			worst = 2;
	}
	return worst;
}

/* DecodeStep.centreRegion: the centre square of a width × height image and the
 * resampler's reach past it along the long side; 0 when that is the whole image. */
static int
centre_region(int width, int height, int smallest_side, int region[4])
{
	int shorter = width < height ? width : height, longer = width < height ? height : width;
	int margin = (3 * shorter + smallest_side - 1) / smallest_side + 4;
	int start = (longer - shorter) / 2 - margin, end = (longer + shorter + 1) / 2 + margin;
	if (start < 0)
		start = 0;
	if (end > longer)
		end = longer;
	if (end - start >= longer)
		return 0;
	if (width > height) {
		region[0] = start; region[1] = 0; region[2] = end - start; region[3] = height;
	} else {
		region[0] = 0; region[1] = start; region[2] = width; region[3] = end - start;
	}
	return 1;
}

/* Whether any entropy-coded segment holds 0xFF 0xFF… 0x00: fill bytes before a
 * stuffed zero (the documented class). Marker segments are skipped by their
 * length; scan data runs from the end of an SOS header to the next marker that is
 * not a restart marker. */
static int
has_fill_before_stuffed_zero(const uint8_t *d, size_t n)
{
	size_t i = 2;
	int in_scan = 0;
	while (i + 1 < n) {
		if (d[i] != 0xFF) {
			i++;
			continue;
		}
		size_t run = 1;
		while (i + run < n && d[i + run] == 0xFF)
			run++;
		if (i + run >= n)
			return 0;
		uint8_t code = d[i + run];
		size_t after = i + run + 1;
		if (code == 0x00) {
			if (in_scan && run >= 2)
				return 1;
			i = after;
		} else if ((code >= 0xD0 && code <= 0xD7) || code == 0x01 || code == 0xD8) {
			i = after;  /* no length */
		} else if (code == 0xD9) {
			in_scan = 0;
			i = after;
		} else {
			if (after + 1 >= n)
				return 0;
			size_t length = (size_t) d[after] << 8 | d[after + 1];
			in_scan = code == 0xDA;
			i = after + (length >= 2 ? length : 2);
		}
	}
	return 0;
}

/* libjpeg-turbo 2.1's jpeg_crop_scanline gives a component the width it would have
 * without scaled IDCTs: where libjpeg decodes a subsampled component at a larger IDCT
 * size (1/2 and 1/4 of 4:1:0 = 4x2 or 2x4 luma files: the chroma IDCT is 8x8 while
 * luma's is 4x4) and still upsamples it with fancy upsampling, the cropped rows'
 * colours are wrong over most of the region (Tests/Fuzz/decoder-known/crop-4x2.jpg).
 * Whether this file at 1/shrink is such a layout: libjpeg's own sizes, read here. */
struct header_errors { struct jpeg_error_mgr pub; jmp_buf jump; };
static void header_fail(j_common_ptr c) { longjmp(((struct header_errors *) c->err)->jump, 1); }
static void header_quiet(j_common_ptr c, int level) { (void) c; (void) level; }

static int
crop_scaled_upsampling(const uint8_t *data, size_t size, int shrink)
{
	struct jpeg_decompress_struct c;
	struct header_errors err;
	volatile int found = 0;
	c.err = jpeg_std_error(&err.pub);
	err.pub.error_exit = header_fail;
	err.pub.emit_message = header_quiet;
	jpeg_create_decompress(&c);
	if (setjmp(err.jump) == 0) {
		jpeg_mem_src(&c, data, (unsigned long) size);
		jpeg_read_header(&c, TRUE);
		c.scale_num = 1;
		c.scale_denom = (unsigned int) shrink;
		jpeg_calc_output_dimensions(&c);
		for (int ci = 0; ci < c.num_components; ci++) {
			jpeg_component_info *k = &c.comp_info[ci];
			int scaled = k->DCT_scaled_size;
			int upsampled = c.max_h_samp_factor * c.min_DCT_scaled_size > k->h_samp_factor * scaled ||
			                c.max_v_samp_factor * c.min_DCT_scaled_size > k->v_samp_factor * scaled;
			if (c.min_DCT_scaled_size > 1 && scaled != c.min_DCT_scaled_size && upsampled)
				found = 1;
		}
	}
	jpeg_destroy_decompress(&c);
	return found;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	stat_inputs++;
	snap_jpeg *j = NULL;
	snap_jpeg_info info;
	int opened = snap_jpeg_open(data, size, 3, &j, &info) == 0;
	snap_jpeg_close(j);
	if (!opened) {
		stat_header_refused++;  /* the same code refuses both ways */
		return 0;
	}
	if ((long) info.width * info.height > MAX_PIXELS) {
		stat_large++;
		return 0;
	}
	if (!strict && has_fill_before_stuffed_zero(data, size)) {
		stat_fill++;
		return 0;
	}
	stat_compared++;
	static const int shrinks[] = { 1, 2, 4, 8 };
	static const int fail_ons[] = { 0, 1, 3 };
	for (int f = 0; f < 3; f++)
		for (int s = 0; s < 4; s++) {
			int fail_on = fail_ons[f], shrink = shrinks[s];
			struct decoded own, ref;
			decode(data, size, fail_on, 0, shrink, NULL, &own);
			decode(data, size, fail_on, 1, shrink, NULL, &ref);
			compare(&own, &ref, fail_on, shrink, NULL);
			if (own.own)
				stat_own_used++;
			if (own.status != 0)
				stat_refused++;
			decoded_free(&ref);
			int region[4];
			if (centre_region((int) info.width / shrink, (int) info.height / shrink, SMALLEST_SIDE, region)) {
				struct decoded own_part, ref_part;
				decode(data, size, fail_on, 0, shrink, region, &own_part);
				decode(data, size, fail_on, 1, shrink, region, &ref_part);
				compare(&own_part, &ref_part, fail_on, shrink, region);
				if (own_part.status != own.status)
					differ("region against the whole decode", fail_on, shrink, region,
					       own.status ? "the region decoded, the whole image was refused" : own_part.message);
				int against = region_against_whole(&own_part, &own);
				if (against == 2 && !strict && crop_scaled_upsampling(data, size, shrink)) {
					stat_crop_bug++;
				} else if (against == 2 && !strict && info.multiscan) {
					stat_smoothing++;
				} else if (against == 2 || (against == 1 && strict)) {
					differ("region against the whole decode", fail_on, shrink, region,
					       against == 1 ? "its first or last column differs"
					                    : "other pixels than that rectangle of the whole decode, inside the region");
				} else if (against == 1) {
					stat_region_edge++;
				}
				decoded_free(&own_part);
				decoded_free(&ref_part);
			}
			decoded_free(&own);
		}
	return 0;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void) argc;
	(void) argv;
	const char *value = getenv("SNAP_FUZZ_STRICT");
	strict = value && strcmp(value, "1") == 0;
	return 0;
}

__attribute__((destructor)) static void
report(void)
{
	if (stat_inputs == 0)
		return;
	fprintf(stderr,
	        "fuzz-decoder: %ld inputs: %ld refused at the header (one code for both), %ld over %ld pixels (skipped), "
	        "%ld with 0xFF fill before a stuffed zero (skipped), %ld compared (%ld decodes by our Huffman decoder, "
	        "%ld refusals alike); centre regions differing from the whole decode at their first or last column: %ld, "
	        "inside (libjpeg-turbo's crop of scaled, upsampled components): %ld, inside (progressive, smoothed): %ld\n",
	        stat_inputs, stat_header_refused, stat_large, MAX_PIXELS, stat_fill, stat_compared, stat_own_used,
	        stat_refused, stat_region_edge, stat_crop_bug, stat_smoothing);
}

/* libjpeg: scaled decoding (the same as libvips' jpegload, without its pipeline). */
#define _GNU_SOURCE 1
#include "jpegshim.h"
#include "kernelshim.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>
#include "jpeg_entropy.h"

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
	const unsigned char *source; /* the file, for a second reading */
	size_t source_len;
	struct snap_entropy *entropy; /* our Huffman decoder (malloc), or NULL */
	int entropy_used;            /* the last decode's coefficients came from it */
	int libjpeg_entropy;         /* it deferred: libjpeg's own decoder from now on */
	int deferred;
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
	j->source = (const unsigned char *) buf;
	j->source_len = len;
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

/* Scale and output colour space for a decode at 1/shrink (inside a setjmp). */
static void
snap_jpeg_setup(snap_jpeg *j, int shrink)
{
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
}

int
snap_jpeg_decode_capacity(snap_jpeg *j, int shrink, size_t *bytes)
{
	if (setjmp(j->jump))
		return -1;
	snap_jpeg_setup(j, shrink);
	jpeg_calc_output_dimensions(&j->cinfo);
	size_t h = j->cinfo.image_height / (unsigned) shrink;
	*bytes = (size_t) j->cinfo.output_width * (size_t) j->cinfo.out_color_components * (h + 1);
	return 0;
}

/* libjpeg's decode_mcu, ours (jpeg_entropy.c). A file it leaves to libjpeg ends
 * this decode; the caller reads the file again and decodes it with libjpeg's. */
static boolean
snap_jpeg_decode_mcu(j_decompress_ptr cinfo, JBLOCKROW *blocks)
{
	struct snap_jpeg *j = (struct snap_jpeg *) cinfo->client_data;
	if (snap_entropy_decode_mcu(j->entropy, blocks) != SNAP_ENTROPY_OK) {
		j->deferred = 1;
		longjmp(j->jump, 1);
	}
	return TRUE;
}

/* Back to the header, for libjpeg's own Huffman decoder. */
static int
snap_jpeg_reread(struct snap_jpeg *j)
{
	if (setjmp(j->jump))
		return -1;
	jpeg_abort_decompress(&j->cinfo);
	j->libjpeg_entropy = 1;
	j->deferred = 0;
	j->exif = NULL;
	j->exif_len = 0;
	jpeg_mem_src(&j->cinfo, j->source, (unsigned long) j->source_len);
	jpeg_read_header(&j->cinfo, TRUE);
	return 0;
}

/* Decodes into `pixels` (at least `capacity` bytes, or NULL to malloc), packed
 * to the kept width. With a region (region[2] > 0: x, y, width, height in the
 * kept image), only that part comes out: libjpeg skips the IDCT and colour
 * conversion of the rows above and below it (their entropy-coded data is still
 * read, so damage there is found as before) and crops columns, moving the left
 * edge to an iMCU boundary; region[] is then set to what was decoded. */

/* libjpeg-turbo 2.1 crops wrongly (jpeg_crop_scanline) a component that it decodes with
 * a larger IDCT and still upsamples: 4:1:0 files at 1/2 and 1/4 came out with the
 * region's colours wrong over most of its width (a green half square). Such files are
 * decoded at full width instead; the region is then all of it
 * (Tests/Fuzz/decoder-known/crop-4x2.jpg). */
static int
snap_crop_miscolours(const struct jpeg_decompress_struct *c)
{
	for (int ci = 0; ci < c->num_components; ci++) {
		const jpeg_component_info *k = &c->comp_info[ci];
		int scaled = k->DCT_scaled_size;
		int upsampled = c->max_h_samp_factor * c->min_DCT_scaled_size > k->h_samp_factor * scaled ||
		                c->max_v_samp_factor * c->min_DCT_scaled_size > k->v_samp_factor * scaled;
		if (c->min_DCT_scaled_size > 1 && scaled != c->min_DCT_scaled_size && upsampled)
			return 1;
	}
	return 0;
}

static int
snap_jpeg_decode_to(snap_jpeg *j, int shrink, unsigned char *given, size_t capacity, unsigned char **out,
                    int *width, int *height, int *bands, int *cmyk, int *region)
{
	unsigned char *volatile pixels = given;
	JSAMPROW *volatile rows = NULL;
	*out = NULL;
	/* Every failure, libjpeg's or ours, comes back here with j->message set. */
	if (setjmp(j->jump)) {
		if (pixels != given)
			free(pixels);
		free(rows);
		return j->deferred ? -2 : -1;
	}
	struct jpeg_decompress_struct *c = &j->cinfo;
	snap_jpeg_setup(j, shrink);
	jpeg_start_decompress(c);
	/* Our Huffman decoder for a baseline single-scan file; libjpeg's otherwise. */
	j->entropy_used = 0;
	if (!j->libjpeg_entropy && snap_jpeg_internals_ok()) {
		if (!j->entropy)
			j->entropy = malloc(sizeof(*j->entropy));
		if (j->entropy && snap_entropy_start(j->entropy, c) == 0) {
			c->entropy->decode_mcu = snap_jpeg_decode_mcu;
			j->entropy_used = 1;
			snap_coef_install(c);
		}
	}
	/* libvips rounds a shrunk size down; libjpeg up. Keep libvips' size. */
	int w = (int) (c->image_width / (unsigned) shrink), h = (int) (c->image_height / (unsigned) shrink);
	int n = c->output_components;
	if (w < 1 || h < 1 || w > (int) c->output_width || h > (int) c->output_height)
		snap_jpeg_stop(j, "image too small for this shrink");
	int top = 0, rows_out = h, left = 0;
	if (region && region[2] > 0 && region[3] > 0) {
		if (region[0] < 0 || region[1] < 0 || region[0] + region[2] > w || region[1] + region[3] > h)
			snap_jpeg_stop(j, "decode region outside the image");
		if (region[2] < w && !snap_crop_miscolours(c)) {
			JDIMENSION x = (JDIMENSION) region[0], cw = (JDIMENSION) region[2];
			jpeg_crop_scanline(c, &x, &cw);
			left = (int) x;
		}
		top = region[1];
		rows_out = region[3];
	}
	/* The kept width of what comes out (libjpeg's rows may be wider). */
	int kept = (int) c->output_width < w - left ? (int) c->output_width : w - left;
	size_t stride = (size_t) c->output_width * n;
	/* Whole output rows (libjpeg writes its full width), the spare row at the end
	 * takes any row past the kept height. */
	if (given && capacity < stride * ((size_t) rows_out + 1))
		snap_jpeg_stop(j, "decode buffer too small");
	if (!given)
		pixels = malloc(stride * ((size_t) rows_out + 1));
	rows = malloc(sizeof(JSAMPROW) * (size_t) c->rec_outbuf_height);
	if (!pixels || !rows)
		snap_jpeg_stop(j, "out of memory");
	if (top > 0)
		jpeg_skip_scanlines(c, (JDIMENSION) top);
	/* The kill flag is checked by the progress monitor on every call. */
	while (c->output_scanline < (JDIMENSION) (top + rows_out)) {
		for (int i = 0; i < c->rec_outbuf_height; i++) {
			size_t y = c->output_scanline - (size_t) top + (size_t) i;
			rows[i] = pixels + stride * (y < (size_t) rows_out ? y : (size_t) rows_out);
		}
		jpeg_read_scanlines(c, rows, (JDIMENSION) c->rec_outbuf_height);
	}
	/* The rows below are read (entropy-decoded, not transformed) as far as a whole
	 * decode would read, so that damage there fails as it did. A skip that reaches
	 * the last row returns without reading anything: stop one row short and read
	 * that row (into the spare one). */
	if (c->output_scanline < (JDIMENSION) h) {
		int to_end = (JDIMENSION) h >= c->output_height;
		JDIMENSION skip = (JDIMENSION) h - c->output_scanline - (to_end ? 1 : 0);
		if (skip > 0)
			jpeg_skip_scanlines(c, skip);
		while (to_end && c->output_scanline < (JDIMENSION) h) {
			for (int i = 0; i < c->rec_outbuf_height; i++)
				rows[i] = pixels + stride * (size_t) rows_out;
			jpeg_read_scanlines(c, rows, (JDIMENSION) c->rec_outbuf_height);
		}
	}
	/* Pack to the kept width. */
	if ((int) c->output_width != kept)
		for (int y = 1; y < rows_out; y++)
			memmove(pixels + (size_t) y * kept * n, pixels + (size_t) y * stride, (size_t) kept * n);
	/* Adobe (Photoshop) writes CMYK inverted: 0 is full ink. */
	if (c->out_color_space == JCS_CMYK && c->saw_Adobe_marker)
		for (size_t i = 0, count = (size_t) kept * rows_out * n; i < count; i++)
			pixels[i] = (unsigned char) (255 - pixels[i]);
	if (region) {
		region[0] = left; region[1] = top; region[2] = kept; region[3] = rows_out;
	}
	w = kept;
	h = rows_out;
	free(rows);
	*out = pixels;
	*width = w;
	*height = h;
	*bands = n;
	*cmyk = c->out_color_space == JCS_CMYK;
	return 0;
}

/* A decode, and again with libjpeg's Huffman decoder if ours left the file to it
 * (damaged, or unusual in a way libjpeg has its own answer for). */
static int
snap_jpeg_decode_any(snap_jpeg *j, int shrink, unsigned char *given, size_t capacity, unsigned char **out,
                     int *width, int *height, int *bands, int *cmyk, int *region)
{
	/* region[] is written only when a decode succeeds. */
	int status = snap_jpeg_decode_to(j, shrink, given, capacity, out, width, height, bands, cmyk, region);
	if (status != -2)
		return status;
	if (snap_jpeg_reread(j) != 0)
		return -1;
	return snap_jpeg_decode_to(j, shrink, given, capacity, out, width, height, bands, cmyk, region);
}

int
snap_jpeg_decode(snap_jpeg *j, int shrink, unsigned char **out, int *width, int *height, int *bands, int *cmyk)
{
	return snap_jpeg_decode_any(j, shrink, NULL, 0, out, width, height, bands, cmyk, NULL);
}

int
snap_jpeg_decode_into(snap_jpeg *j, int shrink, unsigned char *pixels, size_t capacity,
                      int *width, int *height, int *bands, int *cmyk, int *region)
{
	unsigned char *out;
	return snap_jpeg_decode_any(j, shrink, pixels, capacity, &out, width, height, bands, cmyk, region);
}

int snap_jpeg_entropy_used(snap_jpeg *j) { return j ? j->entropy_used : 0; }
void snap_jpeg_libjpeg_entropy(snap_jpeg *j) { if (j) j->libjpeg_entropy = 1; }

const char *snap_jpeg_message_text(snap_jpeg *j) { return j ? j->message : "out of memory"; }
void snap_jpeg_kill(snap_jpeg *j) { if (j) __atomic_store_n(&j->killed, 1, __ATOMIC_RELAXED); }

void
snap_jpeg_close(snap_jpeg *j)
{
	if (!j)
		return;
	jpeg_destroy_decompress(&j->cinfo);
	free(j->icc);
	free(j->entropy);
	free(j);
}

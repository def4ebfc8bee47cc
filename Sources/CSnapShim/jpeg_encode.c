/* libjpeg: the square JPEG, encoded straight from packed RGB. */
#define _GNU_SOURCE 1
#include "snapshim.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>

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
	/* ...and one pair of Huffman tables (DC, AC) for all three components: at
	 * 100 px the chroma pair's header (about 31 bytes) costs more than coding
	 * chroma with the luma statistics does (-0.7 to -1.2 % bytes at equal
	 * quality on the corpus), and half the tables are optimised per encode. */
	for (int c = 0; c < 3; c++) {
		cinfo.comp_info[c].quant_tbl_no = 0;
		cinfo.comp_info[c].dc_tbl_no = 0;
		cinfo.comp_info[c].ac_tbl_no = 0;
	}
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

/* libjpeg's coefficient controller for the files our Huffman decoder reads, with the
 * reduced-size IDCTs done two blocks at a time (issue 27).
 *
 * At 1/4 scale a 4:2:0 MCU is four 2×2 luma IDCTs and two 4×4 chroma ones, each a
 * call through a pointer into libjpeg-turbo's SSE2 assembly (jidctred-sse2.asm):
 * about 9 % of a backfill's CPU. Here the same instructions run on 256-bit registers,
 * one block in each 128-bit lane. Every instruction they use (pmullw, pmaddwd,
 * the unpacks, shifts, saturating packs) works lane by lane in AVX2, so each lane
 * computes exactly what the SSE2 code computes for its block: the same pixels, also
 * for hostile coefficients (16-bit wrap-around and saturation included). The 4×4's
 * shortcut for blocks without vertical AC terms is kept, per lane, because it
 * rounds differently from the full path for out-of-range values.
 *
 * The loop itself is libjpeg-turbo's decompress_onepass (jdcoefct.c), which
 * collects an MCU's IDCTs before running them in pairs. It is installed only after
 * our Huffman decoder, on a processor with AVX2, and only where libjpeg chose its
 * SIMD IDCTs; any other block size still goes through libjpeg's pointer. */
#include "jpeg_entropy.h"

#include <string.h>

#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>
#include "jpegshim.h"
#include "kernelshim.h"

/* The head of libjpeg-turbo's my_coef_controller (jdcoefct.h, which is not
 * installed): the same fields in the same order since libjpeg-turbo 1.0. */
struct snap_coef_head {
	struct jpeg_d_coef_controller pub;
	JDIMENSION MCU_ctr;
	int MCU_vert_offset;
	int MCU_rows_per_iMCU_row;
	JBLOCKROW MCU_buffer[D_MAX_BLOCKS_IN_MCU];
};

/* libjpeg's C reduced-size IDCTs (jdct.h, not installed): where libjpeg chose
 * these over its SIMD ones, its pointer is kept. */
extern void jpeg_idct_2x2(j_decompress_ptr, jpeg_component_info *, JCOEFPTR, JSAMPARRAY, JDIMENSION);
extern void jpeg_idct_4x4(j_decompress_ptr, jpeg_component_info *, JCOEFPTR, JSAMPARRAY, JDIMENSION);

#define SNAP_AVX2 __attribute__((target("avx2"), always_inline)) static inline

/* jidctred-sse2.asm's constants (CONST_BITS 13, PASS1_BITS 2). */
enum {
	F_0_211 = 1730, F_0_509 = 4176, F_0_601 = 4926, F_0_720 = 5906, F_0_765 = 6270,
	F_0_850 = 6967, F_0_899 = 7373, F_1_061 = 8697, F_1_272 = 10426, F_1_451 = 11893,
	F_1_847 = 15137, F_2_172 = 17799, F_2_562 = 20995, F_3_624 = 29692,
	DESCALE_P1_4 = 13 - 2 + 1, DESCALE_P2_4 = 13 + 2 + 3 + 1,
	DESCALE_P1_2 = 13 - 2 + 2, DESCALE_P2_2 = 13 + 2 + 3 + 2,
};

SNAP_AVX2 __m256i pw(int a, int b) { return _mm256_set1_epi32((int) ((uint32_t) (uint16_t) a | (uint32_t) (uint16_t) b << 16)); }
SNAP_AVX2 __m256i pd(int v) { return _mm256_set1_epi32(v); }
/* Row r of two blocks (coefficients or multipliers), one per lane. */
SNAP_AVX2 __m256i rows2(const JCOEF *a, const JCOEF *b, int r)
{
	return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) (a + 8 * r))),
	                               _mm_loadu_si128((const __m128i *) (b + 8 * r)), 1);
}
#define DQ(r) _mm256_mullo_epi16(rows2(ca, cb, r), rows2(qa, qb, r))
#define DESCALE(x, d, n) _mm256_srai_epi32(_mm256_add_epi32(x, d), n)

/* jsimd_idct_2x2_sse2, for blocks a and b. */
__attribute__((target("avx2"))) static void
snap_idct_2x2_pair(const JCOEF *qa, const JCOEF *ca, JSAMPARRAY oa, JDIMENSION cola,
                   const JCOEF *qb, const JCOEF *cb, JSAMPARRAY ob, JDIMENSION colb)
{
	const __m256i f362 = pw(F_3_624, -F_1_272), f085 = pw(F_0_850, -F_0_720);
	/* Pass 1: columns 0, 1, 3, 5, 7. */
	__m256i x0 = DQ(1), x1 = DQ(3), x2 = DQ(5), x3 = DQ(7);
	__m256i x7 = _mm256_slli_epi32(_mm256_set1_epi32(-1), 16);
	__m256i x4 = _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1), f362);
	__m256i x5 = _mm256_madd_epi16(_mm256_unpacklo_epi16(x2, x3), f085);
	x0 = _mm256_or_si256(_mm256_srli_epi32(x0, 16), _mm256_and_si256(x1, x7));
	x2 = _mm256_or_si256(_mm256_srli_epi32(x2, 16), _mm256_and_si256(x3, x7));
	x0 = _mm256_madd_epi16(x0, f362);
	x2 = _mm256_madd_epi16(x2, f085);
	x4 = _mm256_add_epi32(x4, x5);   /* tmp0 of columns 0, 1, -, 3 */
	x0 = _mm256_add_epi32(x0, x2);   /* tmp0 of columns 1, 3, 5, 7 */
	__m256i x6 = DQ(0);
	x1 = _mm256_srai_epi32(_mm256_and_si256(x6, x7), 16 - 13 - 2);  /* tmp10 of columns 1, 3, 5, 7 */
	x6 = _mm256_srai_epi32(_mm256_slli_epi32(x6, 16), 16 - 13 - 2);  /* tmp10 of column 0 */
	x3 = _mm256_sub_epi32(x6, x4);
	x6 = _mm256_add_epi32(x6, x4);
	x5 = _mm256_sub_epi32(x1, x0);
	x1 = _mm256_add_epi32(x1, x0);
	x6 = _mm256_unpacklo_epi32(x6, x3);       /* A0 B0 */
	x7 = _mm256_unpackhi_epi64(x1, x5);       /* A5 A7 B5 B7 */
	x1 = _mm256_unpacklo_epi64(x1, x5);       /* A1 A3 B1 B3 */
	const __m256i d1 = pd(1 << (DESCALE_P1_2 - 1));
	x6 = DESCALE(x6, d1, DESCALE_P1_2);
	x1 = DESCALE(x1, d1, DESCALE_P1_2);
	x7 = DESCALE(x7, d1, DESCALE_P1_2);
	/* Pass 2: rows. */
	x1 = _mm256_madd_epi16(_mm256_packs_epi32(x1, x1), f362);
	x7 = _mm256_madd_epi16(_mm256_packs_epi32(x7, x7), f085);
	x1 = _mm256_add_epi32(x1, x7);
	x6 = _mm256_slli_epi32(x6, 13 + 2);
	x4 = _mm256_sub_epi32(x6, x1);
	x6 = _mm256_add_epi32(x6, x1);
	x6 = _mm256_unpacklo_epi32(x6, x4);
	x6 = DESCALE(x6, pd(1 << (DESCALE_P2_2 - 1)), DESCALE_P2_2);
	x6 = _mm256_packs_epi32(x6, x6);
	x6 = _mm256_packs_epi16(x6, x6);
	x6 = _mm256_add_epi8(x6, _mm256_set1_epi8((char) CENTERJSAMPLE));
	uint16_t w[4] = { (uint16_t) _mm256_extract_epi16(x6, 0), (uint16_t) _mm256_extract_epi16(x6, 1),
	                  (uint16_t) _mm256_extract_epi16(x6, 8), (uint16_t) _mm256_extract_epi16(x6, 9) };
	memcpy(oa[0] + cola, &w[0], 2);
	memcpy(oa[1] + cola, &w[1], 2);
	memcpy(ob[0] + colb, &w[2], 2);
	memcpy(ob[1] + colb, &w[3], 2);
}

/* (a + b) and (a - b), descaled by n bits with rounding d = 1 << (n - 1); n 0 and d
 * zero leave them as they are. */
SNAP_AVX2 void sum_diff(__m256i a, __m256i b, __m256i d, int n, __m256i *sum, __m256i *diff)
{
	*sum = DESCALE(_mm256_add_epi32(a, b), d, n);
	*diff = DESCALE(_mm256_sub_epi32(a, b), d, n);
}

/* The 4×4's odd part, in either pass: from rows (or columns) 1 and 3 interleaved
 * (u13) and 5 and 7 (u57), tmp0 and tmp2. */
SNAP_AVX2 void odd4(__m256i u13, __m256i u57, __m256i *tmp0, __m256i *tmp2)
{
	*tmp0 = _mm256_add_epi32(_mm256_madd_epi16(u57, pw(F_1_451, -F_0_211)), _mm256_madd_epi16(u13, pw(F_1_061, -F_2_172)));
	*tmp2 = _mm256_add_epi32(_mm256_madd_epi16(u57, pw(-F_0_601, -F_0_509)), _mm256_madd_epi16(u13, pw(F_2_562, F_0_899)));
}

/* jsimd_idct_4x4_sse2, for blocks a and b. */
__attribute__((target("avx2"))) static void
snap_idct_4x4_pair(const JCOEF *qa, const JCOEF *ca, JSAMPARRAY oa, JDIMENSION cola,
                   const JCOEF *qb, const JCOEF *cb, JSAMPARRAY ob, JDIMENSION colb)
{
	const __m256i f184 = pw(F_1_847, -F_0_765), zero = _mm256_setzero_si256();
	/* The SSE2 code takes a shortcut for a block whose rows 1-3 and 5-7 are all
	 * zero: a lane that would take it gets the shortcut's columns. */
	__m256i any = _mm256_or_si256(_mm256_or_si256(rows2(ca, cb, 1), rows2(ca, cb, 2)),
	                              _mm256_or_si256(rows2(ca, cb, 3), rows2(ca, cb, 5)));
	any = _mm256_or_si256(any, _mm256_or_si256(rows2(ca, cb, 6), rows2(ca, cb, 7)));
	__m256i flat = _mm256_cmpeq_epi64(any, zero);
	flat = _mm256_and_si256(flat, _mm256_shuffle_epi32(flat, 0x4E));   /* the whole lane */
	int flats = _mm256_movemask_epi8(flat);   /* 0xFFFF per flat lane */

	__m256i x0, x1, x2, x3, x4, x5, x6, x7;
	if (flats != -1) {
		/* Pass 1, the full path: columns. */
		x0 = DQ(1); x1 = DQ(3); x2 = DQ(5); x3 = DQ(7);
		__m256i w0, w1;   /* tmp0 L, H; tmp2 L, H in x6, x7 */
		odd4(_mm256_unpacklo_epi16(x0, x1), _mm256_unpacklo_epi16(x2, x3), &w0, &x6);
		odd4(_mm256_unpackhi_epi16(x0, x1), _mm256_unpackhi_epi16(x2, x3), &w1, &x7);
		x4 = DQ(0); x5 = DQ(2); x0 = DQ(6);
		x1 = _mm256_srai_epi32(_mm256_unpacklo_epi16(zero, x4), 16 - 13 - 1);
		x2 = _mm256_srai_epi32(_mm256_unpackhi_epi16(zero, x4), 16 - 13 - 1);
		x3 = _mm256_madd_epi16(_mm256_unpackhi_epi16(x5, x0), f184);
		x5 = _mm256_madd_epi16(_mm256_unpacklo_epi16(x5, x0), f184);
		sum_diff(x1, x5, zero, 0, &x1, &x4);   /* tmp10 L, tmp12 L */
		sum_diff(x2, x3, zero, 0, &x2, &x0);   /* tmp10 H, tmp12 H */
		/* data0 and data3 from tmp10 ± tmp2, data1 and data2 from tmp12 ± tmp0. */
		const __m256i d1 = pd(1 << (DESCALE_P1_4 - 1));
		__m256i s0, s1, t0, t1;
		sum_diff(x1, x6, d1, DESCALE_P1_4, &s0, &t0);
		sum_diff(x2, x7, d1, DESCALE_P1_4, &s1, &t1);
		x1 = _mm256_packs_epi32(s0, s1);   /* data0 */
		x5 = _mm256_packs_epi32(t0, t1);   /* data3 */
		sum_diff(x4, w0, d1, DESCALE_P1_4, &s0, &t0);
		sum_diff(x0, w1, d1, DESCALE_P1_4, &s1, &t1);
		x4 = _mm256_packs_epi32(s0, s1);   /* data1 */
		x2 = _mm256_packs_epi32(t0, t1);   /* data2 */
		x6 = _mm256_unpackhi_epi16(x1, x4);
		x1 = _mm256_unpacklo_epi16(x1, x4);
		x7 = _mm256_unpackhi_epi16(x2, x5);
		x2 = _mm256_unpacklo_epi16(x2, x5);
		x0 = _mm256_unpackhi_epi32(x1, x2);   /* columns 2, 3 */
		x1 = _mm256_unpacklo_epi32(x1, x2);   /* columns 0, 1 */
		x3 = _mm256_unpackhi_epi32(x6, x7);   /* columns 6, 7 */
		x6 = _mm256_unpacklo_epi32(x6, x7);   /* columns 4, 5 */
	}
	if (flats != 0) {
		/* Pass 1, the shortcut: row 0 dequantised, times 4 with 16-bit wrap-around. */
		__m256i s0 = _mm256_slli_epi16(DQ(0), 2);
		__m256i lo = _mm256_unpacklo_epi16(s0, s0), hi = _mm256_unpackhi_epi16(s0, s0);
		__m256i c01 = _mm256_shuffle_epi32(lo, 0x50), c23 = _mm256_shuffle_epi32(lo, 0xFA),
		        c45 = _mm256_shuffle_epi32(hi, 0x50), c67 = _mm256_shuffle_epi32(hi, 0xFA);
		if (flats == -1) {
			x1 = c01; x0 = c23; x6 = c45; x3 = c67;
		} else {
			x1 = _mm256_blendv_epi8(x1, c01, flat);
			x0 = _mm256_blendv_epi8(x0, c23, flat);
			x6 = _mm256_blendv_epi8(x6, c45, flat);
			x3 = _mm256_blendv_epi8(x3, c67, flat);
		}
	}

	/* Pass 2: rows. */
	x4 = _mm256_srai_epi32(_mm256_unpacklo_epi16(zero, x1), 16 - 13 - 1);   /* tmp0 */
	odd4(_mm256_unpackhi_epi16(x1, x0), _mm256_unpackhi_epi16(x6, x3), &x2, &x6);   /* tmp0, tmp2 */
	x0 = _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x3), f184);
	sum_diff(x4, x0, zero, 0, &x4, &x7);   /* tmp10, tmp12 */
	const __m256i d2 = pd(1 << (DESCALE_P2_4 - 1));
	sum_diff(x4, x6, d2, DESCALE_P2_4, &x4, &x5);   /* data0, data3 */
	sum_diff(x7, x2, d2, DESCALE_P2_4, &x7, &x3);   /* data1, data2 */
	x4 = _mm256_packs_epi32(x4, x3);
	x7 = _mm256_packs_epi32(x7, x5);
	x0 = _mm256_unpackhi_epi16(x4, x7);
	x4 = _mm256_unpacklo_epi16(x4, x7);
	x6 = _mm256_unpackhi_epi32(x4, x0);
	x4 = _mm256_unpacklo_epi32(x4, x0);
	x4 = _mm256_packs_epi16(x4, x6);
	x4 = _mm256_add_epi8(x4, _mm256_set1_epi8((char) CENTERJSAMPLE));
	uint8_t bytes[32];
	_mm256_storeu_si256((__m256i *) bytes, x4);
	for (int r = 0; r < 4; r++) {
		memcpy(oa[r] + cola, bytes + 4 * r, 4);
		memcpy(ob[r] + colb, bytes + 16 + 4 * r, 4);
	}
}

/* One IDCT of an MCU, waiting for its pair. */
struct snap_idct_job {
	const JCOEF *coef, *quant;
	JSAMPARRAY out;
	JDIMENSION col;
};
typedef void (*snap_idct_pair)(const JCOEF *, const JCOEF *, JSAMPARRAY, JDIMENSION,
                               const JCOEF *, const JCOEF *, JSAMPARRAY, JDIMENSION);

static void
snap_run_pairs(const struct snap_idct_job *jobs, int count, snap_idct_pair idct)
{
	int i = 0;
	for (; i + 1 < count; i += 2)
		idct(jobs[i].quant, jobs[i].coef, jobs[i].out, jobs[i].col,
		     jobs[i + 1].quant, jobs[i + 1].coef, jobs[i + 1].out, jobs[i + 1].col);
	if (i < count)   /* an odd one: the same block in both lanes */
		idct(jobs[i].quant, jobs[i].coef, jobs[i].out, jobs[i].col, jobs[i].quant, jobs[i].coef, jobs[i].out, jobs[i].col);
}

/* MCU rows in the current iMCU row, as jdcoefct.c's start_iMCU_row counts them. */
static int
snap_MCU_rows(j_decompress_ptr cinfo)
{
	if (cinfo->comps_in_scan > 1)
		return 1;
	if (cinfo->input_iMCU_row < cinfo->total_iMCU_rows - 1)
		return cinfo->cur_comp_info[0]->v_samp_factor;
	return cinfo->cur_comp_info[0]->last_row_height;
}

/* jdcoefct.c's start_iMCU_row. */
static void
snap_start_iMCU_row(j_decompress_ptr cinfo)
{
	struct snap_coef_head *coef = (struct snap_coef_head *) cinfo->coef;
	coef->MCU_rows_per_iMCU_row = snap_MCU_rows(cinfo);
	coef->MCU_ctr = 0;
	coef->MCU_vert_offset = 0;
}

/* jdcoefct.c's decompress_onepass, the IDCTs of each MCU gathered and run in pairs. */
static int
snap_decompress_onepass(j_decompress_ptr cinfo, JSAMPIMAGE output_buf)
{
	struct snap_coef_head *coef = (struct snap_coef_head *) cinfo->coef;
	JDIMENSION last_MCU_col = cinfo->MCUs_per_row - 1, last_iMCU_row = cinfo->total_iMCU_rows - 1;
	JDIMENSION first_col = cinfo->master->first_iMCU_col, last_col = cinfo->master->last_iMCU_col;
	/* What each component of the scan needs for every MCU, looked up once. */
	struct {
		jpeg_component_info *comp;
		inverse_DCT_method_ptr idct;
		const JCOEF *quant;
		int kind;      /* 2 or 4: our pairs; 0: libjpeg's pointer; -1: not needed */
		int size, blocks, width, height, last_width;
		JSAMPARRAY rows;
	} each[MAX_COMPS_IN_SCAN];
	int comps = cinfo->comps_in_scan;
	for (int ci = 0; ci < comps; ci++) {
		jpeg_component_info *comp = cinfo->cur_comp_info[ci];
		inverse_DCT_method_ptr idct = cinfo->idct->inverse_DCT[comp->component_index];
		each[ci].comp = comp;
		each[ci].idct = idct;
		each[ci].quant = (const JCOEF *) comp->dct_table;
		each[ci].size = comp->DCT_scaled_size;
		each[ci].kind = !comp->component_needed ? -1
		              : comp->DCT_scaled_size == 2 && idct != jpeg_idct_2x2 ? 2
		              : comp->DCT_scaled_size == 4 && idct != jpeg_idct_4x4 ? 4 : 0;
		each[ci].blocks = comp->MCU_blocks;
		each[ci].width = comp->MCU_width;
		each[ci].height = comp->MCU_height;
		each[ci].last_width = comp->last_col_width;
		each[ci].rows = output_buf[comp->component_index];
	}
	int last_row = cinfo->input_iMCU_row >= last_iMCU_row;
	/* 4:2:0 at 1/4, a camera's usual file: four 2×2 luma blocks and one 4×4 block
	 * of each chroma in every MCU. Whole MCUs (not the last column or iMCU row)
	 * take their three pairs directly. */
	int yuv420 = comps == 3 && each[0].kind == 2 && each[0].width == 2 && each[0].height == 2 &&
	             each[1].kind == 4 && each[1].blocks == 1 && each[2].kind == 4 && each[2].blocks == 1 && !last_row;
	size_t zero = (size_t) cinfo->blocks_in_MCU * sizeof(JBLOCK);
	for (int yoffset = coef->MCU_vert_offset; yoffset < coef->MCU_rows_per_iMCU_row; yoffset++) {
		for (JDIMENSION MCU_col_num = coef->MCU_ctr; MCU_col_num <= last_MCU_col; MCU_col_num++) {
			/* The entropy decoder expects a zeroed buffer. */
			memset(coef->MCU_buffer[0], 0, zero);
			if (!cinfo->entropy->insufficient_data)
				cinfo->master->last_good_iMCU_row = cinfo->input_iMCU_row;
			if (!(*cinfo->entropy->decode_mcu)(cinfo, coef->MCU_buffer)) {
				coef->MCU_vert_offset = yoffset;
				coef->MCU_ctr = MCU_col_num;
				return JPEG_SUSPENDED;
			}
			/* Only the blocks inside the cropping region; dummy blocks at the right
			 * and bottom edges are skipped (blkn still counts them). */
			if (MCU_col_num < first_col || MCU_col_num > last_col)
				continue;
			if (yuv420 && MCU_col_num < last_MCU_col) {
				JBLOCKROW *b = coef->MCU_buffer;
				JSAMPARRAY y = each[0].rows + yoffset * 2;
				JDIMENSION x = (MCU_col_num - first_col) * each[0].comp->MCU_sample_width;
				JDIMENSION c = (MCU_col_num - first_col) * each[1].comp->MCU_sample_width;
				snap_idct_2x2_pair(each[0].quant, b[0][0], y, x, each[0].quant, b[1][0], y, x + 2);
				snap_idct_2x2_pair(each[0].quant, b[2][0], y + 2, x, each[0].quant, b[3][0], y + 2, x + 2);
				snap_idct_4x4_pair(each[1].quant, b[4][0], each[1].rows + yoffset * 4, c,
				                   each[2].quant, b[5][0], each[2].rows + yoffset * 4, c);
				continue;
			}
			struct snap_idct_job two[D_MAX_BLOCKS_IN_MCU], four[D_MAX_BLOCKS_IN_MCU];
			int twos = 0, fours = 0, blkn = 0;
			for (int ci = 0; ci < comps; ci++) {
				if (each[ci].kind < 0) {
					blkn += each[ci].blocks;
					continue;
				}
				int size = each[ci].size, useful_width = MCU_col_num < last_MCU_col ? each[ci].width : each[ci].last_width;
				JSAMPARRAY output_ptr = each[ci].rows + yoffset * size;
				JDIMENSION start_col = (MCU_col_num - first_col) * each[ci].comp->MCU_sample_width;
				for (int yindex = 0; yindex < each[ci].height; yindex++) {
					if (!last_row || yoffset + yindex < each[ci].comp->last_row_height) {
						JDIMENSION output_col = start_col;
						for (int xindex = 0; xindex < useful_width; xindex++) {
							JCOEFPTR block = (JCOEFPTR) coef->MCU_buffer[blkn + xindex];
							struct snap_idct_job job = { block, each[ci].quant, output_ptr, output_col };
							if (each[ci].kind == 2) two[twos++] = job;
							else if (each[ci].kind == 4) four[fours++] = job;
							else (*each[ci].idct)(cinfo, each[ci].comp, block, output_ptr, output_col);
							output_col += size;
						}
					}
					blkn += each[ci].width;
					output_ptr += size;
				}
			}
			snap_run_pairs(two, twos, snap_idct_2x2_pair);
			snap_run_pairs(four, fours, snap_idct_4x4_pair);
		}
		coef->MCU_ctr = 0;
	}
	cinfo->output_iMCU_row++;
	if (++(cinfo->input_iMCU_row) < cinfo->total_iMCU_rows) {
		snap_start_iMCU_row(cinfo);
		return JPEG_ROW_COMPLETED;
	}
	(*cinfo->inputctl->finish_input_pass)(cinfo);
	return JPEG_SCAN_COMPLETED;
}

int
snap_coef_install(j_decompress_ptr cinfo)
{
	if (!snap_cpu_has_avx2() || cinfo->buffered_image || cinfo->inputctl->has_multiple_scans)
		return -1;
	struct snap_coef_head *coef = (struct snap_coef_head *) cinfo->coef;
	/* The fields as libjpeg-turbo left them at the start of the scan: MCU_buffer
	 * holds blocks_in_MCU consecutive blocks, and the row count is start_iMCU_row's.
	 * Anything else is not the layout this was written for: leave it to libjpeg. */
	if (cinfo->blocks_in_MCU < 1 || cinfo->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU || coef->MCU_buffer[0] == NULL ||
	    coef->MCU_ctr != 0 || coef->MCU_vert_offset != 0 || cinfo->input_iMCU_row != 0)
		return -1;
	for (int i = 1; i < cinfo->blocks_in_MCU; i++)
		if (coef->MCU_buffer[i] != coef->MCU_buffer[0] + i)
			return -1;
	if (coef->MCU_rows_per_iMCU_row != snap_MCU_rows(cinfo))
		return -1;
	coef->pub.decompress_data = snap_decompress_onepass;
	return 0;
}

#else
int snap_coef_install(j_decompress_ptr cinfo) { (void) cinfo; return -1; }
#endif

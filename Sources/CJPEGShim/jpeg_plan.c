/* The square JPEG of a budget search, from one transform (a plan); libjpeg for
 * its types, the reference writer and its version. */
#define _GNU_SOURCE 1
#include "jpegshim.h"
#include "kernelshim.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>

/* The transform and the quantiser are also compiled for AVX2 (below); no fused
 * multiply-add in either build, so every float is the same. */
#pragma STDC FP_CONTRACT OFF
#pragma clang fp contract(off)

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

/* N. Robidoux's quantisation table (ImageMagick's, mozjpeg's default), natural
 * (row-major) order, one for all three components: at 100 px and 4:4:4 it scored
 * +6 to +7 SSIMULACRA2 over libjpeg's Annex K luma + chroma pair at equal bytes
 * (README: Quality per byte). Scaled by quality as libjpeg scales its own. */
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

/* A budget search tries several qualities of the same pixels. Everything before
 * quantisation (colour conversion, chroma downsampling, the forward DCT) does not
 * depend on the quality, so a plan does it once. For a quality tried, it quantises
 * the plan's coefficients, counts the symbols and the magnitude bits that follow
 * them, and builds the optimal Huffman tables (the JPEG standard's procedure): the
 * size of the file follows from those counts alone, exact but for the 0x00 bytes
 * stuffed after 0xFF bytes of the entropy-coded data, which are estimated. The file
 * is written once, at the quality chosen: baseline, one quantisation table and one
 * pair of Huffman tables for the three components, no other markers. Its bytes are
 * the bytes libjpeg writes from the same coefficients and tables
 * (snap_jpeg_plan_write_libjpeg, which the tests hold it to).
 *
 * The transform is computed in float (exact JFIF colour conversion, the AAN
 * DCT with its scale folded into the quantiser, chroma averaged over 2×2 without
 * rounding in between): more accurate than libjpeg's 8-bit colour conversion
 * and integer DCT. Floating-point contraction is off, and every sum runs in a
 * fixed order, so the coefficients are the same on every IEEE 754 machine. */

/* The estimate's allowance for stuffing: one 0x00 per this many bytes of the
 * entropy-coded segment, as if its bytes were random (on the corpus squares the
 * estimate is within 3 bytes, root mean square, of the written file). */
#define SNAP_STUFFING_PER 256

#pragma STDC FP_CONTRACT OFF
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <math.h>
#include <stdint.h>
#include <pthread.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Zigzag position k -> natural (row-major) index. */
static const int snap_zigzag[64] = {
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
};

struct snap_jpeg_plan {
	int width, height, subsample;
	int comp_w[3], comp_h[3];        /* blocks per row and column of each component */
	int comp_first[3];               /* index of each component's first block */
	int blocks;
	float *coef;                     /* blocks × 64 true DCT coefficients, zigzag order */
	/* The order libjpeg codes blocks in: component, block index (or -1 for a
	 * dummy block at the right or bottom edge of a 4:2:0 MCU). */
	int sequence;
	short *order_comp;
	int *order_block;
	short *quantised;                /* blocks × 64, zigzag, for the last quality */
	uint64_t *nonzero;               /* per block: bit k set when zigzag coefficient k is not 0 */
	int prepared_for;                /* quality of `quantised`, the tables and `bits` */
	long bits;
	JHUFF_TBL dc[1], ac[1];          /* the optimal pair for the last quantisation */
};

/* JFIF colour conversion, level-shifted (Y − 128, Cb − 128, Cr − 128). */
static inline void
snap_plan_colour(const unsigned char *px, float *y, float *cb, float *cr)
{
	float r = px[0], g = px[1], b = px[2];
	*y = 0.299f * r + 0.587f * g + 0.114f * b - 128.0f;
	*cb = -0.168735892f * r - 0.331264108f * g + 0.5f * b;
	*cr = 0.5f * r - 0.418687589f * g - 0.081312411f * b;
}

/* 1 / (8 · s(u) · s(v)) at each zigzag position, s(0) = 1, s(k) = √2 · cos(kπ/16):
 * the scale of the AAN transform's outputs, folded into the quantiser. */
static float snap_aan_descale[64];
/* Zigzag position k -> index into the transform's transposed output. */
static int snap_aan_order[64];

static void
snap_dct_init(void)
{
	double s[8];
	for (int k = 0; k < 8; k++)
		s[k] = k == 0 ? 1.0 : sqrt(2.0) * cos(k * M_PI / 16);
	for (int k = 0; k < 64; k++) {
		int v = snap_zigzag[k] / 8, u = snap_zigzag[k] % 8;
		snap_aan_descale[k] = (float) (1.0 / (8.0 * s[u] * s[v]));
		snap_aan_order[k] = u * 8 + v;
	}
}

/* One pass of the AAN 8-point DCT (Arai, Agui, Nakajima: 5 multiplications) over
 * eight lanes at once: d[j][lane] are the samples, o[k][lane] the scaled outputs. */
static inline void
snap_aan_pass(float d[8][8], float o[8][8])
{
	for (int l = 0; l < 8; l++) {
		float t0 = d[0][l] + d[7][l], t7 = d[0][l] - d[7][l];
		float t1 = d[1][l] + d[6][l], t6 = d[1][l] - d[6][l];
		float t2 = d[2][l] + d[5][l], t5 = d[2][l] - d[5][l];
		float t3 = d[3][l] + d[4][l], t4 = d[3][l] - d[4][l];
		/* even part */
		float t10 = t0 + t3, t13 = t0 - t3, t11 = t1 + t2, t12 = t1 - t2;
		o[0][l] = t10 + t11;
		o[4][l] = t10 - t11;
		float z1 = (t12 + t13) * 0.707106781f;
		o[2][l] = t13 + z1;
		o[6][l] = t13 - z1;
		/* odd part */
		t10 = t4 + t5;
		t11 = t5 + t6;
		t12 = t6 + t7;
		float z5 = (t10 - t12) * 0.382683433f;
		float z2 = 0.541196100f * t10 + z5;
		float z4 = 1.306562965f * t12 + z5;
		float z3 = t11 * 0.707106781f;
		float z11 = t7 + z3, z13 = t7 - z3;
		o[5][l] = z13 + z2;
		o[3][l] = z13 - z2;
		o[1][l] = z11 + z4;
		o[7][l] = z11 - z4;
	}
}

/* The 8×8 DCT of `block` (natural order) into 64 zigzag floats, scaled by
 * 8 · s(u) · s(v) (snap_aan_descale undoes it). */
static inline __attribute__((always_inline)) void
snap_dct_block(float block[8][8], float *out)
{
	float columns[8][8], transposed[8][8], both[8][8];
	snap_aan_pass(block, columns);             /* columns[v][x] */
	for (int v = 0; v < 8; v++)
		for (int x = 0; x < 8; x++)
			transposed[x][v] = columns[v][x];
	snap_aan_pass(transposed, both);           /* both[u][v] */
	const float *flat = &both[0][0];
	for (int k = 0; k < 64; k++)
		out[k] = flat[snap_aan_order[k]];
}

void
snap_jpeg_plan_free(snap_jpeg_plan *p)
{
	if (!p)
		return;
	free(p->coef);
	free(p->order_comp);
	free(p->order_block);
	free(p->quantised);
	free(p->nonzero);
	free(p);
}

static inline __attribute__((always_inline)) int
snap_jpeg_plan_new_body(const unsigned char *rgb, int width, int height, int subsample, snap_jpeg_plan **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, snap_dct_init);
	*out = NULL;
	if (width < 1 || height < 1 || width > 4096 || height > 4096 || (subsample != 1 && subsample != 2))
		return -1;
	snap_jpeg_plan *p = calloc(1, sizeof(*p));
	if (!p)
		return -1;
	p->width = width; p->height = height; p->subsample = subsample;
	p->prepared_for = -1;
	int f = subsample;
	/* Component sizes as libjpeg computes them (jcmaster.c initial_setup). */
	int cw[3] = { width, (width + f - 1) / f, (width + f - 1) / f };
	int ch[3] = { height, (height + f - 1) / f, (height + f - 1) / f };
	for (int c = 0; c < 3; c++) {
		p->comp_w[c] = (cw[c] + 7) / 8;
		p->comp_h[c] = (ch[c] + 7) / 8;
		p->comp_first[c] = p->blocks;
		p->blocks += p->comp_w[c] * p->comp_h[c];
	}
	p->coef = malloc(sizeof(float) * 64 * (size_t) p->blocks);
	p->quantised = malloc(sizeof(short) * 64 * (size_t) p->blocks);
	p->nonzero = malloc(sizeof(uint64_t) * (size_t) p->blocks);
	if (!p->coef || !p->quantised || !p->nonzero) {
		snap_jpeg_plan_free(p);
		return -1;
	}
	/* Block by block, with the edges replicated past the image as libjpeg pads
	 * them (for 4:2:0, to whole 2×2 cells before averaging, then to whole blocks). */
	size_t stride = (size_t) width * 3;
	float yb[8][8], cbb[8][8], crb[8][8];
	for (int by = 0; by < p->comp_h[0]; by++)
		for (int bx = 0; bx < p->comp_w[0]; bx++) {
			for (int y = 0; y < 8; y++) {
				int sy = by * 8 + y < height ? by * 8 + y : height - 1;
				for (int x = 0; x < 8; x++) {
					int sx = bx * 8 + x < width ? bx * 8 + x : width - 1;
					snap_plan_colour(rgb + sy * stride + 3 * (size_t) sx, &yb[y][x], &cbb[y][x], &crb[y][x]);
				}
			}
			int i = by * p->comp_w[0] + bx;
			snap_dct_block(yb, p->coef + 64 * (size_t) (p->comp_first[0] + i));
			if (f == 1) {
				snap_dct_block(cbb, p->coef + 64 * (size_t) (p->comp_first[1] + i));
				snap_dct_block(crb, p->coef + 64 * (size_t) (p->comp_first[2] + i));
			}
		}
	if (f == 2)
		for (int by = 0; by < p->comp_h[1]; by++)
			for (int bx = 0; bx < p->comp_w[1]; bx++) {
				for (int y = 0; y < 8; y++) {
					int cy = by * 8 + y < ch[1] ? by * 8 + y : ch[1] - 1;
					for (int x = 0; x < 8; x++) {
						int cx = bx * 8 + x < cw[1] ? bx * 8 + x : cw[1] - 1;
						float sb = 0, sr = 0, unused;
						for (int dy = 0; dy < 2; dy++)
							for (int dx = 0; dx < 2; dx++) {
								int sy = 2 * cy + dy < height ? 2 * cy + dy : height - 1;
								int sx = 2 * cx + dx < width ? 2 * cx + dx : width - 1;
								float b, r;
								snap_plan_colour(rgb + sy * stride + 3 * (size_t) sx, &unused, &b, &r);
								sb = sb + b;
								sr = sr + r;
							}
						cbb[y][x] = sb * 0.25f;
						crb[y][x] = sr * 0.25f;
					}
				}
				int i = by * p->comp_w[1] + bx;
				snap_dct_block(cbb, p->coef + 64 * (size_t) (p->comp_first[1] + i));
				snap_dct_block(crb, p->coef + 64 * (size_t) (p->comp_first[2] + i));
			}

	/* libjpeg's block order: MCU by MCU, each component's blocks in the MCU row by
	 * row; past a component's last block column or row, a dummy block (jctrans.c:
	 * zero AC, the DC of the block before it, so a DC difference of 0). */
	int mcu_cols = (width + 8 * f - 1) / (8 * f), mcu_rows = (height + 8 * f - 1) / (8 * f);
	int samp[3] = { f, 1, 1 };
	p->sequence = 0;
	for (int c = 0; c < 3; c++)
		p->sequence += mcu_cols * mcu_rows * samp[c] * samp[c];
	p->order_comp = malloc(sizeof(short) * (size_t) p->sequence);
	p->order_block = malloc(sizeof(int) * (size_t) p->sequence);
	if (!p->order_comp || !p->order_block) {
		snap_jpeg_plan_free(p);
		return -1;
	}
	int s = 0;
	for (int my = 0; my < mcu_rows; my++)
		for (int mx = 0; mx < mcu_cols; mx++)
			for (int c = 0; c < 3; c++)
				for (int yy = 0; yy < samp[c]; yy++)
					for (int xx = 0; xx < samp[c]; xx++) {
						int bx = mx * samp[c] + xx, by = my * samp[c] + yy;
						p->order_comp[s] = (short) c;
						p->order_block[s] = bx < p->comp_w[c] && by < p->comp_h[c]
							? p->comp_first[c] + by * p->comp_w[c] + bx : -1;
						s++;
					}

	*out = p;
	return 0;
}

/* The colour conversion and the DCTs in an AVX2 build too where the processor has
 * it (the eight lanes of each AAN pass eight floats a vector): the same operations
 * on every value, so the same coefficients. */
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target("avx2"))) static int
snap_jpeg_plan_new_avx2(const unsigned char *rgb, int width, int height, int subsample, snap_jpeg_plan **out)
{
	return snap_jpeg_plan_new_body(rgb, width, height, subsample, out);
}
#endif

int
snap_jpeg_plan_new(const unsigned char *rgb, int width, int height, int subsample, snap_jpeg_plan **out)
{
#if defined(__x86_64__) && defined(__clang__)
	if (snap_cpu_has_avx2())
		return snap_jpeg_plan_new_avx2(rgb, width, height, subsample, out);
#endif
	return snap_jpeg_plan_new_body(rgb, width, height, subsample, out);
}

/* The quantisation table at `quality`: the Robidoux table scaled as libjpeg scales
 * (jpeg_add_quant_table with force_baseline), natural order. */
static void
snap_plan_table(int quality, unsigned int table[64])
{
	long scale = jpeg_quality_scaling(quality);
	for (int i = 0; i < 64; i++) {
		long t = ((long) snap_robidoux_table[i] * scale + 50L) / 100L;
		if (t <= 0L) t = 1L;
		if (t > 255L) t = 255L;
		table[i] = (unsigned int) t;
	}
}

/* Bit k set when q[k] is not 0. */
static inline uint64_t
snap_nonzero_mask(const short q[64])
{
#if defined(__SSE2__)
	uint64_t mask = 0;
	const __m128i zero = _mm_setzero_si128();
	for (int k = 0; k < 64; k += 16) {
		__m128i a = _mm_loadu_si128((const __m128i *) (q + k));
		__m128i b = _mm_loadu_si128((const __m128i *) (q + k + 8));
		__m128i zeros = _mm_packs_epi16(_mm_cmpeq_epi16(a, zero), _mm_cmpeq_epi16(b, zero));
		mask |= (uint64_t) (unsigned int) (~_mm_movemask_epi8(zeros) & 0xFFFF) << k;
	}
	return mask;
#else
	uint64_t mask = 0;
	for (int k = 0; k < 64; k++)
		mask |= (uint64_t) (q[k] != 0) << k;
	return mask;
#endif
}

static inline __attribute__((always_inline)) void
snap_plan_quantise_body(snap_jpeg_plan *p, int quality)
{
	unsigned int table[64];
	snap_plan_table(quality, table);
	float inverse[64];
	for (int k = 0; k < 64; k++)
		inverse[k] = snap_aan_descale[k] / (float) table[snap_zigzag[k]];
	for (int b = 0; b < p->blocks; b++) {
		const float *coef = p->coef + 64 * (size_t) b;
		short *q = p->quantised + 64 * (size_t) b;
		for (int k = 0; k < 64; k++) {
			/* Rounded half away from zero, within baseline's 10-bit AC range (the
			 * DC stays inside it anyway). */
			float v = coef[k] * inverse[k];
			float a = (v < 0 ? -v : v) + 0.5f;
			a = a > 1023.0f ? 1023.0f : a;
			int n = (int) a;
			q[k] = (short) (v < 0 ? -n : n);
		}
		p->nonzero[b] = snap_nonzero_mask(q);
	}
}

#if defined(__x86_64__) && defined(__clang__)
__attribute__((target("avx2"))) static void
snap_plan_quantise_avx2(snap_jpeg_plan *p, int quality)
{
	snap_plan_quantise_body(p, quality);
}
#endif

/* Each try's quantisation, in AVX2 where the processor has it (the same products,
 * roundings and clamps lane by lane). */
static void
snap_plan_quantise(snap_jpeg_plan *p, int quality)
{
#if defined(__x86_64__) && defined(__clang__)
	if (snap_cpu_has_avx2()) { snap_plan_quantise_avx2(p, quality); return; }
#endif
	snap_plan_quantise_body(p, quality);
}

static inline int
snap_nbits(int v)
{
	unsigned int a = (unsigned int) (v < 0 ? -v : v);
	return a ? 32 - __builtin_clz(a) : 0;
}

/* Counts DC and AC symbols over libjpeg's block order; returns the magnitude
 * bits that follow them. */
static long
snap_plan_count(const snap_jpeg_plan *p, long dc[257], long ac[257])
{
	long extra = 0;
	memset(dc, 0, sizeof(long) * 257);
	memset(ac, 0, sizeof(long) * 257);
	int last[3] = { 0, 0, 0 };
	for (int s = 0; s < p->sequence; s++) {
		int c = p->order_comp[s], b = p->order_block[s];
		if (b < 0) { dc[0]++; ac[0]++; continue; }
		const short *q = p->quantised + 64 * (size_t) b;
		int nb = snap_nbits(q[0] - last[c]);
		dc[nb]++;
		extra += nb;
		last[c] = q[0];
		/* Only the coefficients that are not 0, in zigzag order. */
		uint64_t rest = p->nonzero[b] & ~(uint64_t) 1;
		int previous = 0;
		while (rest) {
			int k = __builtin_ctzll(rest);
			rest &= rest - 1;
			int run = k - previous - 1;
			previous = k;
			while (run > 15) { ac[0xF0]++; run -= 16; }
			nb = snap_nbits(q[k]);
			ac[(run << 4) + nb]++;
			extra += nb;
		}
		if (previous < 63) ac[0]++;
	}
	return extra;
}

/* Code lengths and codes of a table as libjpeg derives them (jchuff.c,
 * jpeg_make_c_derived_tbl): canonical codes in huffval order. */
static void
snap_plan_codes(const JHUFF_TBL *t, unsigned int code[256], unsigned char size[256])
{
	memset(size, 0, 256);
	unsigned int c = 0;
	int p = 0;
	for (int l = 1; l <= 16; l++) {
		for (int i = 0; i < t->bits[l]; i++, p++) {
			code[t->huffval[p]] = c++;
			size[t->huffval[p]] = (unsigned char) l;
		}
		c <<= 1;
	}
}

/* The entropy coder's bit stream: bits go into a 64-bit buffer and leave it 32
 * at a time; each 0xFF byte is followed by a stuffed 0x00. With no `out`, only
 * the bytes are counted. */
struct snap_bits {
	uint64_t buffer;
	int bits;
	long bytes;
	unsigned char *out;
};

static inline int
snap_ff_bytes(uint32_t word)
{
	uint32_t t = ~word;   /* a 0xFF byte of word is a zero byte of t */
	uint32_t nonzero = (((t & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | t) & 0x80808080u;
	return 4 - __builtin_popcount(nonzero);
}

static inline void
snap_byte(struct snap_bits *w, unsigned int byte)
{
	if (w->out) {
		w->out[w->bytes] = (unsigned char) byte;
		if (byte == 0xFF)
			w->out[w->bytes + 1] = 0;
	}
	w->bytes += byte == 0xFF ? 2 : 1;
}

/* `code` holds exactly `size` bits (size at most 27). */
static inline void
snap_put_bits(struct snap_bits *w, uint32_t code, int size)
{
	w->buffer = (w->buffer << size) | code;
	w->bits += size;
	if (w->bits >= 32) {
		w->bits -= 32;
		uint32_t word = (uint32_t) (w->buffer >> w->bits);
		if (w->out)
			for (int i = 3; i >= 0; i--) snap_byte(w, (word >> (8 * i)) & 0xFF);
		else
			w->bytes += 4 + snap_ff_bytes(word);
	}
}

/* The last bits, padded with 1 bits to a whole byte as libjpeg pads them. */
static inline void
snap_flush_bits(struct snap_bits *w)
{
	int pad = (8 - (w->bits & 7)) & 7;
	w->buffer = (w->buffer << pad) | ((1u << pad) - 1u);
	w->bits += pad;
	while (w->bits >= 8) {
		w->bits -= 8;
		snap_byte(w, (unsigned int) (w->buffer >> w->bits) & 0xFF);
	}
}

/* A value's magnitude bits after its category's code (negative values as v - 1). */
static inline uint32_t
snap_magnitude(int v, int nb)
{
	return (uint32_t) (v < 0 ? v - 1 : v) & ((1u << nb) - 1u);
}

/* An optimal Huffman table for `freq` (symbols 0-255), by the procedure of the
 * JPEG standard (ITU T.81 Annex K.2, K.3) with libjpeg's ties (the smallest
 * frequency, the higher symbol first): a reserved symbol 256 of frequency 1 keeps
 * every code from being all 1 bits, lengths over 16 are folded back, the reserved
 * code is dropped. Only the symbols that occur are scanned (libjpeg's
 * jpeg_gen_optimal_table scans all 257 on every merge). */
static void
snap_huffman_table(const long freq[256], JHUFF_TBL *t)
{
	enum { MAX_DEPTH = 258 };
	int symbol[257], codesize[257], others[257];
	long weight[257];
	int n = 0;
	for (int i = 0; i < 256; i++)
		if (freq[i] > 0) { symbol[n] = i; weight[n] = freq[i]; n++; }
	symbol[n] = 256; weight[n] = 1; n++;
	for (int i = 0; i < 257; i++) { codesize[i] = 0; others[i] = -1; }
	while (n > 1) {
		int a = -1, b = -1;
		for (int j = 0; j < n; j++)
			if (a < 0 || weight[j] <= weight[a]) a = j;
		for (int j = 0; j < n; j++)
			if (j != a && (b < 0 || weight[j] <= weight[b])) b = j;
		int c1 = symbol[a], c2 = symbol[b];
		weight[a] += weight[b];
		for (int j = b; j + 1 < n; j++) { symbol[j] = symbol[j + 1]; weight[j] = weight[j + 1]; }
		n--;
		codesize[c1]++;
		while (others[c1] >= 0) { c1 = others[c1]; codesize[c1]++; }
		others[c1] = c2;
		codesize[c2]++;
		while (others[c2] >= 0) { c2 = others[c2]; codesize[c2]++; }
	}
	int bits[MAX_DEPTH + 1] = { 0 };
	int deepest = 0;
	for (int i = 0; i < 257; i++)
		if (codesize[i]) {
			bits[codesize[i]]++;
			if (codesize[i] > deepest) deepest = codesize[i];
		}
	for (int i = deepest; i > 16; i--)
		while (bits[i] > 0) {
			int j = i - 2;
			while (bits[j] == 0) j--;
			bits[i] -= 2;
			bits[i - 1]++;
			bits[j + 1] += 2;
			bits[j]--;
		}
	int i = 16;
	while (bits[i] == 0) i--;
	bits[i]--;
	memset(t->bits, 0, sizeof(t->bits));
	for (int l = 1; l <= 16; l++) t->bits[l] = (UINT8) bits[l];
	int p = 0;
	for (int l = 1; l <= deepest; l++)
		for (int j = 0; j < 256; j++)
			if (codesize[j] == l) t->huffval[p++] = (UINT8) j;
	t->sent_table = FALSE;
}

/* Builds the optimal tables for the quantised coefficients (into p->dc, p->ac);
 * returns the bits of the entropy-coded segment (before padding and stuffing). */
static long
snap_plan_tables(snap_jpeg_plan *p)
{
	long dc[257], ac[257];
	long bits = snap_plan_count(p, dc, ac);
	snap_huffman_table(dc, p->dc);
	snap_huffman_table(ac, p->ac);
	unsigned int code[256];
	unsigned char dsize[256], asize[256];
	snap_plan_codes(p->dc, code, dsize);
	snap_plan_codes(p->ac, code, asize);
	for (int i = 0; i < 256; i++)
		bits += dc[i] * dsize[i] + ac[i] * asize[i];
	return bits;
}

/* The entropy-coded segment of the quantised coefficients with the plan's tables,
 * into `out` (or only counted): its byte count. */
static long
snap_plan_scan(const snap_jpeg_plan *p, unsigned char *out)
{
	unsigned int dcode[256], acode[256];
	unsigned char dsize[256], asize[256];
	snap_plan_codes(p->dc, dcode, dsize);
	snap_plan_codes(p->ac, acode, asize);
	struct snap_bits w = { 0, 0, 0, out };
	int last[3] = { 0, 0, 0 };
	for (int s = 0; s < p->sequence; s++) {
		int c = p->order_comp[s], b = p->order_block[s];
		if (b < 0) {
			snap_put_bits(&w, dcode[0], dsize[0]);
			snap_put_bits(&w, acode[0], asize[0]);
			continue;
		}
		const short *q = p->quantised + 64 * (size_t) b;
		int diff = q[0] - last[c], nb = snap_nbits(diff);
		last[c] = q[0];
		snap_put_bits(&w, (dcode[nb] << nb) | snap_magnitude(diff, nb), dsize[nb] + nb);
		uint64_t rest = p->nonzero[b] & ~(uint64_t) 1;
		int previous = 0;
		while (rest) {
			int k = __builtin_ctzll(rest);
			rest &= rest - 1;
			int run = k - previous - 1, v = q[k];
			previous = k;
			while (run > 15) { snap_put_bits(&w, acode[0xF0], asize[0xF0]); run -= 16; }
			nb = snap_nbits(v);
			int sym = (run << 4) + nb;
			snap_put_bits(&w, (acode[sym] << nb) | snap_magnitude(v, nb), asize[sym] + nb);
		}
		if (previous < 63)
			snap_put_bits(&w, acode[0], asize[0]);
	}
	snap_flush_bits(&w);
	return w.bytes;
}

static int
snap_table_symbols(const JHUFF_TBL *t)
{
	int n = 0;
	for (int l = 1; l <= 16; l++) n += t->bits[l];
	return n;
}

/* Bytes of everything but the entropy-coded segment: SOI, DQT (one 8-bit table),
 * SOF0 (three components), DHT (DC, AC: one marker each), SOS, EOI. */
static long
snap_plan_headers(const snap_jpeg_plan *p)
{
	return 2 + (2 + 2 + 1 + 64) + (2 + 2 + 6 + 3 * 3)
		+ (2 + 2 + 1 + 16 + snap_table_symbols(p->dc)) + (2 + 2 + 1 + 16 + snap_table_symbols(p->ac))
		+ (2 + 2 + 1 + 3 * 2 + 3) + 2;
}

/* Quantised coefficients and tables at `quality`, and the entropy-coded bits
 * (kept for the next call at the same quality). */
static void
snap_plan_prepare(snap_jpeg_plan *p, int quality)
{
	if (p->prepared_for == quality)
		return;
	snap_plan_quantise(p, quality);
	p->bits = snap_plan_tables(p);
	p->prepared_for = quality;
}

long
snap_jpeg_plan_estimate(snap_jpeg_plan *p, int quality)
{
	snap_plan_prepare(p, quality);
	long entropy = (p->bits + 7) / 8;
	return snap_plan_headers(p) + entropy + entropy / SNAP_STUFFING_PER;
}

static unsigned char *
snap_marker(unsigned char *o, int marker, int length)
{
	o[0] = 0xFF; o[1] = (unsigned char) marker;
	o[2] = (unsigned char) (length >> 8); o[3] = (unsigned char) length;
	return o + 4;
}

static unsigned char *
snap_dht(unsigned char *o, int class_id, const JHUFF_TBL *t)
{
	int n = snap_table_symbols(t);
	o = snap_marker(o, 0xC4, 2 + 1 + 16 + n);
	*o++ = (unsigned char) class_id;
	for (int l = 1; l <= 16; l++) *o++ = t->bits[l];
	memcpy(o, t->huffval, (size_t) n);
	return o + n;
}

int
snap_jpeg_plan_write(snap_jpeg_plan *p, int quality, unsigned char **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	snap_plan_prepare(p, quality);
	/* At most every byte of the entropy-coded segment is stuffed. */
	size_t bound = (size_t) snap_plan_headers(p) + 2 * (size_t) ((p->bits + 7) / 8);
	unsigned char *file = malloc(bound), *o = file;
	if (!file)
		return -1;
	unsigned int table[64];
	snap_plan_table(quality, table);
	*o++ = 0xFF; *o++ = 0xD8;                          /* SOI */
	o = snap_marker(o, 0xDB, 2 + 1 + 64);              /* DQT: table 0, 8-bit, zigzag order */
	*o++ = 0;
	for (int k = 0; k < 64; k++) *o++ = (unsigned char) table[snap_zigzag[k]];
	o = snap_marker(o, 0xC0, 2 + 6 + 3 * 3);           /* SOF0: baseline */
	*o++ = 8;
	*o++ = (unsigned char) (p->height >> 8); *o++ = (unsigned char) p->height;
	*o++ = (unsigned char) (p->width >> 8); *o++ = (unsigned char) p->width;
	*o++ = 3;
	for (int c = 0; c < 3; c++) {
		int f = c == 0 ? p->subsample : 1;
		*o++ = (unsigned char) (c + 1);
		*o++ = (unsigned char) ((f << 4) | f);
		*o++ = 0;
	}
	o = snap_dht(o, 0x00, p->dc);
	o = snap_dht(o, 0x10, p->ac);
	o = snap_marker(o, 0xDA, 2 + 1 + 3 * 2 + 3);       /* SOS: all three components */
	*o++ = 3;
	for (int c = 0; c < 3; c++) { *o++ = (unsigned char) (c + 1); *o++ = 0x00; }
	*o++ = 0; *o++ = 63; *o++ = 0;
	o += snap_plan_scan(p, o);
	*o++ = 0xFF; *o++ = 0xD9;                          /* EOI */
	*out = file;
	*out_len = (size_t) (o - file);
	return 0;
}

/* The same file written by libjpeg (jpeg_write_coefficients) from the plan's
 * coefficients and tables: the reference the tests hold snap_jpeg_plan_write to. */
int
snap_jpeg_plan_write_libjpeg(snap_jpeg_plan *p, int quality, unsigned char **out, size_t *out_len)
{
	struct jpeg_compress_struct cinfo;
	struct snap_jpeg_error jerr;
	unsigned char *buffer = NULL;
	unsigned long length = 0;
	*out = NULL;
	*out_len = 0;
	snap_plan_prepare(p, quality);
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
	cinfo.image_width = (JDIMENSION) p->width;
	cinfo.image_height = (JDIMENSION) p->height;
	cinfo.input_components = 3;
	cinfo.in_color_space = JCS_YCbCr;
	jpeg_set_defaults(&cinfo);
	unsigned int table[64];
	snap_plan_table(quality, table);
	jpeg_add_quant_table(&cinfo, 0, table, 100, TRUE);
	/* The plan's tables, built from these very coefficients (no second statistics pass). */
	memcpy(cinfo.dc_huff_tbl_ptrs[0]->bits, p->dc->bits, sizeof(p->dc->bits));
	memcpy(cinfo.dc_huff_tbl_ptrs[0]->huffval, p->dc->huffval, sizeof(p->dc->huffval));
	memcpy(cinfo.ac_huff_tbl_ptrs[0]->bits, p->ac->bits, sizeof(p->ac->bits));
	memcpy(cinfo.ac_huff_tbl_ptrs[0]->huffval, p->ac->huffval, sizeof(p->ac->huffval));
	cinfo.optimize_coding = FALSE;
	cinfo.write_JFIF_header = FALSE;
	cinfo.write_Adobe_marker = FALSE;
	int samp[3] = { p->subsample, 1, 1 };
	jvirt_barray_ptr arrays[3];
	for (int c = 0; c < 3; c++) {
		jpeg_component_info *comp = &cinfo.comp_info[c];
		comp->quant_tbl_no = 0;
		comp->dc_tbl_no = 0;
		comp->ac_tbl_no = 0;
		comp->h_samp_factor = samp[c];
		comp->v_samp_factor = samp[c];
		int wb = (p->comp_w[c] + samp[c] - 1) / samp[c] * samp[c];
		int hb = (p->comp_h[c] + samp[c] - 1) / samp[c] * samp[c];
		arrays[c] = (*cinfo.mem->request_virt_barray)((j_common_ptr) &cinfo, JPOOL_IMAGE, TRUE,
		                                                (JDIMENSION) wb, (JDIMENSION) hb, (JDIMENSION) samp[c]);
	}
	jpeg_write_coefficients(&cinfo, arrays);
	for (int c = 0; c < 3; c++) {
		int wb = (p->comp_w[c] + samp[c] - 1) / samp[c] * samp[c];
		int hb = (p->comp_h[c] + samp[c] - 1) / samp[c] * samp[c];
		for (int by = 0; by < hb; by++) {
			JBLOCKARRAY row = (*cinfo.mem->access_virt_barray)((j_common_ptr) &cinfo, arrays[c], (JDIMENSION) by, 1, TRUE);
			for (int bx = 0; bx < wb; bx++) {
				JCOEF *block = row[0][bx];
				if (bx >= p->comp_w[c] || by >= p->comp_h[c]) {
					memset(block, 0, sizeof(JBLOCK));
					continue;
				}
				const short *q = p->quantised + 64 * (size_t) (p->comp_first[c] + by * p->comp_w[c] + bx);
				for (int k = 0; k < 64; k++)
					block[snap_zigzag[k]] = q[k];
			}
		}
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

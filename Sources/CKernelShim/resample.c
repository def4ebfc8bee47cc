/* Lanczos3 square resampling and orientation of packed RGB (no library). */
#define _GNU_SOURCE 1
#include "kernelshim.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#pragma STDC FP_CONTRACT OFF
#pragma clang fp contract(off)

/* lrintf without the call into libm (30,000 per square): the same rounding, to
 * nearest even in the default rounding mode, which nothing here changes. */
static inline long
snap_round(float v)
{
#if defined(__SSE__) || defined(__x86_64__)
	return _mm_cvtss_si32(_mm_set_ss(v));
#else
	return lrintf(v);
#endif
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

/* acc[i] += w[0]·src[0][i] + … in that order, four taps per pass over acc (the
 * same additions in the same order as one tap at a time, a quarter of the loads
 * and stores of acc). `fresh`: acc holds nothing yet, and the first pass starts
 * from 0.0f instead of reading it: the same +0.0f the caller used to store there
 * first (a memset of every row, 1 % of a snap's instructions), so the same sums. */
static inline __attribute__((always_inline)) void
snap_accumulate_body(float *restrict acc, size_t n, const float *const *src, const float *w, int taps, int fresh)
{
	int k = 0;
	for (; k + 4 <= taps; k += 4) {
		const float *s0 = src[k], *s1 = src[k + 1], *s2 = src[k + 2], *s3 = src[k + 3];
		float w0 = w[k], w1 = w[k + 1], w2 = w[k + 2], w3 = w[k + 3];
		if (fresh && k == 0) {
			for (size_t i = 0; i < n; i++) {
				float a = 0.0f;
				a += w0 * s0[i];
				a += w1 * s1[i];
				a += w2 * s2[i];
				a += w3 * s3[i];
				acc[i] = a;
			}
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			float a = acc[i];
			a += w0 * s0[i];
			a += w1 * s1[i];
			a += w2 * s2[i];
			a += w3 * s3[i];
			acc[i] = a;
		}
	}
	for (; k < taps; k++) {
		const float *s0 = src[k];
		float w0 = w[k];
		if (fresh && k == 0) {
			for (size_t i = 0; i < n; i++) acc[i] = 0.0f + w0 * s0[i];
			continue;
		}
		for (size_t i = 0; i < n; i++) acc[i] += w0 * s0[i];
	}
	if (fresh && taps <= 0)
		for (size_t i = 0; i < n; i++) acc[i] = 0.0f;
}

/* The same loops compiled for AVX2 too (eight floats a vector instead of four; no
 * fused multiply-add, contraction is off), run where the processor has it: each
 * output is the same sum in the same order, so the pixels are the same. */
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target("avx2"))) static void
snap_accumulate_fresh_avx2(float *restrict acc, size_t n, const float *const *src, const float *w, int taps)
{
	snap_accumulate_body(acc, n, src, w, taps, 1);
}
#endif

/* The sums into an acc that holds nothing yet (see `fresh` above). */
static void
snap_accumulate_fresh(float *restrict acc, size_t n, const float *const *src, const float *w, int taps)
{
#if defined(__x86_64__) && defined(__clang__)
	if (snap_cpu_has_avx2()) { snap_accumulate_fresh_avx2(acc, n, src, w, taps); return; }
#endif
	snap_accumulate_body(acc, n, src, w, taps, 1);
}

/* Weights of the last few axes this thread resampled: snaps mostly share one
 * decoded size (1080×1440 → 270×360, or 360×270 when stored turned), and
 * computing the weights took a sixth of the resampler's time (two sin() per tap).
 * An axis's weights depend on its length, the short side and the output side.
 * Fixed arrays, no malloc: nothing to free when a thread ends. */
#define SNAP_CACHE_AXES 4
#define SNAP_CACHE_SIDE 256
#define SNAP_CACHE_WEIGHTS 4096
struct snap_axis_cache {
	int len, shortside, side, taps;
	unsigned long used;   /* when it last served (a per-thread clock): the least recent is replaced */
	int first[2 * SNAP_CACHE_SIDE];
	float w[SNAP_CACHE_WEIGHTS];
};
static __thread struct snap_axis_cache snap_axes[SNAP_CACHE_AXES];
static __thread unsigned long snap_axes_clock;

/* The folded weights of one axis: from the cache, or computed (and cached when
 * they fit). *w is malloc'd. */
static int
snap_axis(int side, int len, int shortside, double scale, double offset, int *first, float **w, int *taps)
{
	for (int i = 0; i < SNAP_CACHE_AXES; i++) {
		struct snap_axis_cache *c = &snap_axes[i];
		if (c->taps > 0 && c->len == len && c->shortside == shortside && c->side == side) {
			c->used = ++snap_axes_clock;
			*w = malloc(sizeof(float) * (size_t) side * c->taps);
			if (!*w) return -1;
			memcpy(first, c->first, sizeof(int) * side * 2);
			memcpy(*w, c->w, sizeof(float) * (size_t) side * c->taps);
			*taps = c->taps;
			return 0;
		}
	}
	if (snap_weights(side, len, scale, offset, first, first + side, w, taps) ||
	    snap_fold_edges(side, len, *taps, first, first + side, *w))
		return -1;
	if (side <= SNAP_CACHE_SIDE && side * *taps <= SNAP_CACHE_WEIGHTS) {
		/* The least recently used entry (an empty one first): replacing in turn let
		 * one odd-sized snap (a crop of 998×1330) evict both axes of the common size,
		 * and the next common snap computed them again (a miss on two thirds of the
		 * corpus's snaps). */
		struct snap_axis_cache *c = &snap_axes[0];
		for (int i = 1; i < SNAP_CACHE_AXES; i++)
			if (snap_axes[i].used < c->used) c = &snap_axes[i];
		c->used = ++snap_axes_clock;
		memcpy(c->first, first, sizeof(int) * side * 2);
		memcpy(c->w, *w, sizeof(float) * (size_t) side * *taps);
		c->len = len; c->shortside = shortside; c->side = side; c->taps = *taps;
	}
	return 0;
}

int
snap_square_rgb(const unsigned char *rgb, int width, int height, int side, unsigned char *out)
{
	return snap_square_rgb_region(rgb, width, height, 0, 0, width, height, side, out);
}

static inline __attribute__((always_inline)) int
snap_square_region_body(const unsigned char *rgb, int region_width, int region_height, int left_at, int top_at,
                        int width, int height, int side, unsigned char *out)
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
	float *xw = NULL, *yw = NULL, *ring = NULL, *row = NULL, *colsT = NULL, *acc = NULL;
	const float **src = NULL;
	int xt = 0, yt = 0, status = -1;
	if (!xf || !yf) goto done;
	int shortside = width < height ? width : height;
	if (snap_axis(side, width, shortside, scale, left, xf, &xw, &xt) ||
	    snap_axis(side, height, shortside, scale, top, yf, &yw, &yt))
		goto done;

	/* Only the columns and rows the crop reads. */
	int c0 = xf[0], c1 = xf[side - 1] + xf[2 * side - 1] - 1;
	for (int x = 0; x < side; x++) {
		if (xf[x] < c0) c0 = xf[x];
		if (xf[x] + xf[side + x] - 1 > c1) c1 = xf[x] + xf[side + x] - 1;
	}
	int r0 = yf[0], r1 = yf[side - 1] + yf[2 * side - 1] - 1;
	for (int y = 0; y < side; y++) {
		if (yf[y] < r0) r0 = yf[y];
		if (yf[y] + yf[side + y] - 1 > r1) r1 = yf[y] + yf[side + y] - 1;
	}
	if (c0 < left_at || r0 < top_at || c1 >= left_at + region_width || r1 >= top_at + region_height) {
		status = -2;
		goto done;
	}
	size_t span = (size_t) (c1 - c0 + 1) * 3;
	int ncols = c1 - c0 + 1;
	/* Every buffer stays under glibc's mmap threshold (128 KiB, fixed at start):
	 * larger ones were mapped and faulted in afresh for every image. */
	enum { BLOCK = 16 };
	ring = malloc(sizeof(float) * (size_t) yt * span);      /* the last yt input rows, as float */
	row = malloc(sizeof(float) * span);                     /* one output row of the vertical pass */
	colsT = malloc(sizeof(float) * (size_t) ncols * BLOCK * 3);
	acc = malloc(sizeof(float) * BLOCK * 3);
	src = malloc(sizeof(float *) * (size_t) (xt > yt ? xt : yt));
	if (!ring || !row || !colsT || !acc || !src) goto done;
	int converted = r0;   /* input rows below this are in the ring */
	for (int y0 = 0; y0 < side; y0 += BLOCK) {
		int rows = side - y0 < BLOCK ? side - y0 : BLOCK;
		/* Vertical pass: each output row is a weighted sum of whole input row
		 * spans (each input row converted to float once, kept while taps need it). */
		for (int y = y0; y < y0 + rows; y++) {
			int first = yf[y], count = yf[side + y];
			for (; converted < first + count; converted++) {
				const unsigned char *in = rgb + ((size_t) (converted - top_at) * region_width + (c0 - left_at)) * 3;
				float *dst = ring + (size_t) ((converted - r0) % yt) * span;
				for (size_t i = 0; i < span; i++) dst[i] = (float) in[i];
			}
			for (int k = 0; k < count; k++) src[k] = ring + (size_t) ((first + k - r0) % yt) * span;
			snap_accumulate_fresh(row, span, src, yw + (size_t) y * yt, count);
			/* Turned: each input column's rows of this block side by side. */
			for (int c = 0; c < ncols; c++) {
				float *dst = colsT + ((size_t) c * BLOCK + (size_t) (y - y0)) * 3;
				dst[0] = row[c * 3]; dst[1] = row[c * 3 + 1]; dst[2] = row[c * 3 + 2];
			}
		}
		/* Horizontal pass, as contiguous loops too: every output column of the
		 * block is a weighted sum of whole input columns. Each sum adds the same
		 * products in the same order as a per-pixel loop, so the pixels are the same. */
		size_t n = (size_t) rows * 3;
		for (int x = 0; x < side; x++) {
			for (int k = 0; k < xf[side + x]; k++) src[k] = colsT + (size_t) (xf[x] - c0 + k) * BLOCK * 3;
			snap_accumulate_fresh(acc, n, src, xw + (size_t) x * xt, xf[side + x]);
#if defined(__SSE2__)
			/* A whole block: its 48 values rounded as snap_round rounds (cvtps is
			 * cvtss four at a time, the same mode) and clamped to 0…255 by the two
			 * saturating packs (an out-of-range or NaN value converts to INT_MIN, 0
			 * either way): the same bytes as the loop below, without a branch each. */
			if (rows == BLOCK) {
				unsigned char bytes[BLOCK * 3];
				for (int i = 0; i < BLOCK * 3; i += 16) {
					__m128i q0 = _mm_cvtps_epi32(_mm_loadu_ps(acc + i));
					__m128i q1 = _mm_cvtps_epi32(_mm_loadu_ps(acc + i + 4));
					__m128i q2 = _mm_cvtps_epi32(_mm_loadu_ps(acc + i + 8));
					__m128i q3 = _mm_cvtps_epi32(_mm_loadu_ps(acc + i + 12));
					_mm_storeu_si128((__m128i *) (bytes + i),
					                 _mm_packus_epi16(_mm_packs_epi32(q0, q1), _mm_packs_epi32(q2, q3)));
				}
				for (int y = 0; y < BLOCK; y++)
					memcpy(out + ((size_t) (y0 + y) * side + x) * 3, bytes + y * 3, 3);
				continue;
			}
#endif
			for (int y = 0; y < rows; y++) {
				unsigned char *dst = out + ((size_t) (y0 + y) * side + x) * 3;
				for (int ch = 0; ch < 3; ch++) {
					long q = snap_round(acc[y * 3 + ch]);
					dst[ch] = (unsigned char) (q < 0 ? 0 : q > 255 ? 255 : q);
				}
			}
		}
	}
	status = 0;
done:
	free(xf); free(yf); free(xw); free(yw); free(ring); free(row); free(colsT); free(acc); free(src);
	return status;
}

/* The whole square in an AVX2 build too where the processor has it (the rows'
 * conversion to float and the turn between the passes vectorise wider): the same
 * operations on every pixel, so the same pixels. */
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target("avx2"))) static int
snap_square_region_avx2(const unsigned char *rgb, int region_width, int region_height, int left_at, int top_at,
                        int width, int height, int side, unsigned char *out)
{
	return snap_square_region_body(rgb, region_width, region_height, left_at, top_at, width, height, side, out);
}
#endif

int
snap_square_rgb_region(const unsigned char *rgb, int region_width, int region_height, int left_at, int top_at,
                       int width, int height, int side, unsigned char *out)
{
#if defined(__x86_64__) && defined(__clang__)
	if (snap_cpu_has_avx2())
		return snap_square_region_avx2(rgb, region_width, region_height, left_at, top_at, width, height, side, out);
#endif
	return snap_square_region_body(rgb, region_width, region_height, left_at, top_at, width, height, side, out);
}

/* Where the pixel shown at (x, y) of the turned and flipped image comes from. */
static inline const unsigned char *
snap_orient_source(const unsigned char *rgb, int width, int height, int ow, int rotate, int flip, int x, int y)
{
	int rx = flip ? ow - 1 - x : x, sx, sy;
	switch (rotate) {
	case 90: sx = y; sy = height - 1 - rx; break;
	case 180: sx = width - 1 - rx; sy = height - 1 - y; break;
	case 270: sx = width - 1 - y; sy = rx; break;
	default: sx = rx; sy = y; break;
	}
	return rgb + ((size_t) sy * width + sx) * 3;
}

void
snap_orient_rgb(const unsigned char *rgb, int width, int height, int rotate, int flip, unsigned char *out)
{
	int swap = rotate == 90 || rotate == 270;
	int ow = swap ? height : width, oh = swap ? width : height;

	/* Along an output row the source moves by a fixed step (a pixel or a row,
	 * either way): found once per row instead of a switch per pixel. */
	for (int y = 0; y < oh; y++) {
		unsigned char *row = out + (size_t) y * ow * 3;
		const unsigned char *p = snap_orient_source(rgb, width, height, ow, rotate, flip, 0, y);
		ptrdiff_t step = ow > 1 ? snap_orient_source(rgb, width, height, ow, rotate, flip, 1, y) - p : 0;
		for (int x = 0; x < ow; x++, p += step) {
			row[x * 3] = p[0];
			row[x * 3 + 1] = p[1];
			row[x * 3 + 2] = p[2];
		}
	}
}

/* Sums over neighbouring pixels of packed RGB side×side, for the budget search's
 * size prediction: |Δy| and |Δ(B−Y)| + |Δ(R−Y)| over rows and columns,
 * |2y − left − right| and |2y − up − down|, the pairs with |Δy| ≤ 1, and Δy²,
 * with y = (77R + 150G + 29B) >> 8. */
static inline __attribute__((always_inline)) void
snap_pixel_steps_body(const unsigned char *rgb, int side, long *luma, long *chroma, long *second,
                      long *flat, long *squares)
{
	*luma = *chroma = *second = *flat = *squares = 0;
	if (side < 1)
		return;
	size_t n = (size_t) side * side;
	short *y = malloc(sizeof(short) * n * 3);
	if (!y)
		return;
	short *cb = y + n, *cr = cb + n;
	for (size_t i = 0; i < n; i++) {
		int r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
		int l = (77 * r + 150 * g + 29 * b) >> 8;
		y[i] = (short) l; cb[i] = (short) (b - l); cr[i] = (short) (r - l);
	}
	long steps = 0, csteps = 0, curv = 0, level = 0, square = 0;
	for (int row = 0; row < side; row++) {
		const short *a = y + (size_t) row * side, *p = cb + (size_t) row * side, *q = cr + (size_t) row * side;
		/* Per row in int (vector lanes): at most 2 · 1024 · 255² for Δy². */
		int s = 0, c = 0, v = 0, f = 0, sq = 0;
		for (int x = 0; x + 1 < side; x++) {
			int d = a[x] - a[x + 1];
			s += abs(d); f += abs(d) <= 1; sq += d * d;
			c += abs(p[x] - p[x + 1]) + abs(q[x] - q[x + 1]);
		}
		for (int x = 1; x + 1 < side; x++)
			v += abs(2 * a[x] - a[x - 1] - a[x + 1]);
		if (row + 1 < side) {
			const short *a2 = a + side, *p2 = p + side, *q2 = q + side;
			for (int x = 0; x < side; x++) {
				int d = a[x] - a2[x];
				s += abs(d); f += abs(d) <= 1; sq += d * d;
				c += abs(p[x] - p2[x]) + abs(q[x] - q2[x]);
			}
			if (row > 0) {
				const short *a0 = a - side;
				for (int x = 0; x < side; x++)
					v += abs(2 * a[x] - a0[x] - a2[x]);
			}
		}
		steps += s; csteps += c; curv += v; level += f; square += sq;
	}
	free(y);
	*luma = steps; *chroma = csteps; *second = curv; *flat = level; *squares = square;
}

/* The same integer sums compiled for AVX2 too (sixteen shorts a vector), chosen
 * where the processor has it: integers, so the same counts. */
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target("avx2"))) static void
snap_pixel_steps_avx2(const unsigned char *rgb, int side, long *luma, long *chroma, long *second,
                      long *flat, long *squares)
{
	snap_pixel_steps_body(rgb, side, luma, chroma, second, flat, squares);
}
#endif

void
snap_pixel_steps(const unsigned char *rgb, int side, long *luma, long *chroma, long *second,
                 long *flat, long *squares)
{
#if defined(__x86_64__) && defined(__clang__)
	if (snap_cpu_has_avx2()) { snap_pixel_steps_avx2(rgb, side, luma, chroma, second, flat, squares); return; }
#endif
	snap_pixel_steps_body(rgb, side, luma, chroma, second, flat, squares);
}

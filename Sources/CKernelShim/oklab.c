/* The drawn pixel art's per-pixel arithmetic in OKLab (SnapThumbCore's OKLab.swift,
 * Steps/DrawnGrid.swift, Steps/OKLabQuantizer.swift): the same operations in the
 * same order as the Swift code they replace, in IEEE 754 double precision with
 * contraction off, so every colour is bit for bit the one Swift computed (the
 * tests compare both on the colour cube, random cells and random point sets). */
#include "kernelshim.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF
#pragma clang fp contract(off)
/* The four-lane helpers are always inlined: no vector crosses a call. */
#pragma clang diagnostic ignored "-Wpsabi"

/* Four lanes; without AVX the compiler splits each operation in two SSE2 halves. */
typedef double snap_v4d __attribute__((vector_size(32)));
typedef long long snap_v4l __attribute__((vector_size(32)));

/* Each kernel is compiled twice, for any x86-64 and for AVX2 (wider vectors, the same
 * IEEE operations lane by lane: AVX2 brings no fused multiply-add, and contraction
 * is off besides), and runs the AVX2 one where the processor has it. */
#if defined(__x86_64__) && defined(__clang__)
#define SNAP_DISPATCH 1
#define SNAP_INLINE static inline __attribute__((always_inline))
int
snap_cpu_has_avx2(void)
{
	static int known = -1;
	int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx2") ? 1 : 0;
		__atomic_store_n(&known, v, __ATOMIC_RELAXED);
	}
	return v;
}
#else
#define SNAP_DISPATCH 0
#define SNAP_INLINE static inline
#endif

/* OKLab.cubeRoot, lane by lane, for finite x >= 0: the guess from the exponent bits,
 * two Halley steps, and 0 for 0. */
SNAP_INLINE snap_v4d
snap_cube_root4(snap_v4d x)
{
	snap_v4d y;
	for (int i = 0; i < 4; i++) {
		double v = x[i];
		uint64_t bits;
		memcpy(&bits, &v, 8);
		bits = bits / 3 + 0x2A9F7893782DA1CEULL;
		double g;
		memcpy(&g, &bits, 8);
		y[i] = g;
	}
	for (int step = 0; step < 2; step++) {
		snap_v4d y3 = y * y * y;
		y *= (y3 + 2.0 * x) / (2.0 * y3 + x);
	}
	snap_v4l nonzero = x != 0.0;
	return (snap_v4d)((snap_v4l)y & nonzero);
}

/* The scalar root, as OKLab.cubeRoot (for the last pixels). */
SNAP_INLINE double
snap_cube_root(double x)
{
	if (x == 0 || !isfinite(x)) return x;
	double v = fabs(x);
	uint64_t bits;
	memcpy(&bits, &v, 8);
	bits = bits / 3 + 0x2A9F7893782DA1CEULL;
	double y;
	memcpy(&y, &bits, 8);
	for (int step = 0; step < 2; step++) {
		double y3 = y * y * y;
		y *= (y3 + 2 * v) / (2 * y3 + v);
	}
	return x < 0 ? -y : y;
}

SNAP_INLINE void
snap_oklab_image_body(const unsigned char *rgb, long count, const double *linear, double *lab)
{
	long i = 0;
	for (; i + 4 <= count; i += 4) {
		const unsigned char *p = rgb + 3 * i;
		snap_v4d r = { linear[p[0]], linear[p[3]], linear[p[6]], linear[p[9]] };
		snap_v4d g = { linear[p[1]], linear[p[4]], linear[p[7]], linear[p[10]] };
		snap_v4d b = { linear[p[2]], linear[p[5]], linear[p[8]], linear[p[11]] };
		snap_v4d l = snap_cube_root4(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b);
		snap_v4d m = snap_cube_root4(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b);
		snap_v4d s = snap_cube_root4(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b);
		snap_v4d ol = 0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s;
		snap_v4d oa = 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s;
		snap_v4d ob = 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s;
		for (int k = 0; k < 4; k++) {
			lab[3 * (i + k)] = ol[k];
			lab[3 * (i + k) + 1] = oa[k];
			lab[3 * (i + k) + 2] = ob[k];
		}
	}
	for (; i < count; i++) {
		const unsigned char *p = rgb + 3 * i;
		double r = linear[p[0]], g = linear[p[1]], b = linear[p[2]];
		double l = snap_cube_root(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b);
		double m = snap_cube_root(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b);
		double s = snap_cube_root(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b);
		lab[3 * i] = 0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s;
		lab[3 * i + 1] = 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s;
		lab[3 * i + 2] = 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s;
	}
}

#if SNAP_DISPATCH
__attribute__((target("avx2"))) static void
snap_oklab_image_avx2(const unsigned char *rgb, long count, const double *linear, double *lab)
{
	snap_oklab_image_body(rgb, count, linear, lab);
}
#endif

void
snap_oklab_image(const unsigned char *rgb, long count, const double *linear, double *lab)
{
#if SNAP_DISPATCH
	if (snap_cpu_has_avx2()) { snap_oklab_image_avx2(rgb, count, linear, lab); return; }
#endif
	snap_oklab_image_body(rgb, count, linear, lab);
}

/* DrawnGrid.representative of count pixels, components in pl, pa, pb; out: l, a, b. */
SNAP_INLINE void
snap_representative(const double *restrict pl, const double *restrict pa, const double *restrict pb, int count,
		    long *restrict nearer, double *out)
{
	double sl = 0.0, sa = 0.0, sb = 0.0;
	for (int k = 0; k < count; k++) { sl += pl[k]; sa += pa[k]; sb += pb[k]; }
	double total = (double)count;
	double mean[3] = { sl / total, sa / total, sb / total };
	int dark = 0, light = 0;
	for (int k = 0; k < count; k++) {
		if (pl[k] < pl[dark]) dark = k;
		if (pl[k] > pl[light]) light = k;
	}
	double c0[3] = { pl[dark], pa[dark], pb[dark] }, c1[3] = { pl[light], pa[light], pb[light] };
	double dl = c0[0] - c1[0], da = c0[1] - c1[1], db = c0[2] - c1[2];
	if (sqrt(dl * dl + da * da + db * db) < 0.06) { memcpy(out, mean, sizeof mean); return; }
	int n0 = 0, n1 = 0;
	for (int iteration = 0; iteration < 4; iteration++) {
		/* Which centre each pixel is nearer (the first on a tie), all pixels at once;
		 * then the sums in pixel order. Adding +0.0 for a pixel of the other group
		 * leaves a sum as it is (a sum from +0.0 is never -0.0), so no branches. */
		const double c0l = c0[0], c0a = c0[1], c0b = c0[2], c1l = c1[0], c1a = c1[1], c1b = c1[2];
		for (int k = 0; k < count; k++) {
			double d0l = pl[k] - c0l, d0a = pa[k] - c0a, d0b = pb[k] - c0b;
			double d1l = pl[k] - c1l, d1a = pa[k] - c1a, d1b = pb[k] - c1b;
			nearer[k] = d0l * d0l + d0a * d0a + d0b * d0b <= d1l * d1l + d1a * d1a + d1b * d1b;
		}
		double s0l = 0.0, s0a = 0.0, s0b = 0.0, s1l = 0.0, s1a = 0.0, s1b = 0.0;
		n0 = 0;
		for (int k = 0; k < count; k++) {
			long first = nearer[k];
			double l = pl[k], a = pa[k], b = pb[k];
			s0l += first ? l : 0.0; s0a += first ? a : 0.0; s0b += first ? b : 0.0;
			s1l += first ? 0.0 : l; s1a += first ? 0.0 : a; s1b += first ? 0.0 : b;
			n0 += (int)first;
		}
		n1 = count - n0;
		if (n0 == 0 || n1 == 0) { memcpy(out, mean, sizeof mean); return; }
		double m0 = (double)n0, m1 = (double)n1;
		double next0[3] = { s0l / m0, s0a / m0, s0b / m0 }, next1[3] = { s1l / m1, s1a / m1, s1b / m1 };
		int same = next0[0] == c0[0] && next0[1] == c0[1] && next0[2] == c0[2]
			&& next1[0] == c1[0] && next1[1] == c1[1] && next1[2] == c1[2];
		if (same) break;
		memcpy(c0, next0, sizeof c0);
		memcpy(c1, next1, sizeof c1);
	}
	const double *chosen;
	if (n0 != n1) chosen = n0 > n1 ? c0 : c1;
	else chosen = fabs(c0[0] - mean[0]) <= fabs(c1[0] - mean[0]) ? c0 : c1;
	memcpy(out, chosen, 3 * sizeof(double));
}

/* snap_representative of four cells at once, lane j the cell whose colours are lane j of
 * pl, pa, pb (count each) and whose result goes to out[j]. Every lane takes its own cell's
 * steps in the same order with the same operations (the sums, the comparisons, the
 * divisions, the early ends), so each result is bit for bit the one-cell function's: the
 * cells' dependent chains of additions (16 in a row for each sum) overlap instead of
 * following one another. */
SNAP_INLINE void
snap_representative4(const snap_v4d *restrict pl, const snap_v4d *restrict pa, const snap_v4d *restrict pb, int count,
		     double *const out[4])
{
	snap_v4d sl = { 0.0, 0.0, 0.0, 0.0 }, sa = sl, sb = sl;
	for (int k = 0; k < count; k++) { sl += pl[k]; sa += pa[k]; sb += pb[k]; }
	double total = (double)count;
	snap_v4d ml = sl / total, ma = sa / total, mb = sb / total;
	snap_v4d darkv = pl[0], lightv = pl[0];
	snap_v4l darki = { 0, 0, 0, 0 }, lighti = darki;
	for (int k = 0; k < count; k++) {
		snap_v4l less = pl[k] < darkv, more = pl[k] > lightv;
		darkv = (snap_v4d)(((snap_v4l)pl[k] & less) | ((snap_v4l)darkv & ~less));
		darki = (k & less) | (darki & ~less);
		lightv = (snap_v4d)(((snap_v4l)pl[k] & more) | ((snap_v4l)lightv & ~more));
		lighti = (k & more) | (lighti & ~more);
	}
	snap_v4d c0l, c0a, c0b, c1l, c1a, c1b;
	int live[4], mean[4], n0[4] = { 0, 0, 0, 0 }, n1[4] = { 0, 0, 0, 0 };
	for (int j = 0; j < 4; j++) {
		long dark = (long)darki[j], light = (long)lighti[j];
		c0l[j] = pl[dark][j]; c0a[j] = pa[dark][j]; c0b[j] = pb[dark][j];
		c1l[j] = pl[light][j]; c1a[j] = pa[light][j]; c1b[j] = pb[light][j];
		double dl = c0l[j] - c1l[j], da = c0a[j] - c1a[j], db = c0b[j] - c1b[j];
		mean[j] = sqrt(dl * dl + da * da + db * db) < 0.06;
		live[j] = !mean[j];
	}
	for (int iteration = 0; iteration < 4 && (live[0] | live[1] | live[2] | live[3]); iteration++) {
		snap_v4d s0l = { 0.0, 0.0, 0.0, 0.0 }, s0a = s0l, s0b = s0l, s1l = s0l, s1a = s0l, s1b = s0l;
		snap_v4l count0 = { 0, 0, 0, 0 };
		for (int k = 0; k < count; k++) {
			snap_v4d d0l = pl[k] - c0l, d0a = pa[k] - c0a, d0b = pb[k] - c0b;
			snap_v4d d1l = pl[k] - c1l, d1a = pa[k] - c1a, d1b = pb[k] - c1b;
			snap_v4l first = d0l * d0l + d0a * d0a + d0b * d0b <= d1l * d1l + d1a * d1a + d1b * d1b;
			/* +0.0 added for a pixel of the other group, as in snap_representative. */
			s0l += (snap_v4d)((snap_v4l)pl[k] & first); s0a += (snap_v4d)((snap_v4l)pa[k] & first);
			s0b += (snap_v4d)((snap_v4l)pb[k] & first);
			s1l += (snap_v4d)((snap_v4l)pl[k] & ~first); s1a += (snap_v4d)((snap_v4l)pa[k] & ~first);
			s1b += (snap_v4d)((snap_v4l)pb[k] & ~first);
			count0 -= first;
		}
		for (int j = 0; j < 4; j++) {
			if (!live[j]) continue;
			n0[j] = (int)count0[j];
			n1[j] = count - n0[j];
			if (n0[j] == 0 || n1[j] == 0) { mean[j] = 1; live[j] = 0; continue; }
			double m0 = (double)n0[j], m1 = (double)n1[j];
			double next0[3] = { s0l[j] / m0, s0a[j] / m0, s0b[j] / m0 }, next1[3] = { s1l[j] / m1, s1a[j] / m1, s1b[j] / m1 };
			int same = next0[0] == c0l[j] && next0[1] == c0a[j] && next0[2] == c0b[j]
				&& next1[0] == c1l[j] && next1[1] == c1a[j] && next1[2] == c1b[j];
			if (same) { live[j] = 0; continue; }
			c0l[j] = next0[0]; c0a[j] = next0[1]; c0b[j] = next0[2];
			c1l[j] = next1[0]; c1a[j] = next1[1]; c1b[j] = next1[2];
		}
	}
	for (int j = 0; j < 4; j++) {
		double *o = out[j];
		if (mean[j]) { o[0] = ml[j]; o[1] = ma[j]; o[2] = mb[j]; continue; }
		int zero = n0[j] != n1[j] ? n0[j] > n1[j] : fabs(c0l[j] - ml[j]) <= fabs(c1l[j] - ml[j]);
		o[0] = zero ? c0l[j] : c1l[j]; o[1] = zero ? c0a[j] : c1a[j]; o[2] = zero ? c0b[j] : c1b[j];
	}
}

/* The most pixels a cell may have for snap_representative4 (its colours are kept on the
 * stack); larger cells go one at a time. */
#define SNAP_CELL4_MAX 64

SNAP_INLINE void
snap_drawn_cells_body(const double *lab, int side, int factor, double *scratch, double *out)
{
	int n = side / factor, count = factor * factor, cells = n * n, c = 0;
	double *pl = scratch, *pa = scratch + count, *pb = scratch + 2 * count;
	long *nearer = (long *)(scratch + 3 * count);
	if (count <= SNAP_CELL4_MAX) {
		snap_v4d vl[SNAP_CELL4_MAX], va[SNAP_CELL4_MAX], vb[SNAP_CELL4_MAX];
		for (; c + 4 <= cells; c += 4) {
			double *to[4];
			for (int j = 0; j < 4; j++) {
				int x = (c + j) % n, y = (c + j) / n, k = 0;
				to[j] = out + 3 * (size_t)(c + j);
				for (int dy = 0; dy < factor; dy++) {
					const double *row = lab + 3 * ((size_t)(y * factor + dy) * side + x * factor);
					for (int dx = 0; dx < factor; dx++, k++) {
						vl[k][j] = row[3 * dx]; va[k][j] = row[3 * dx + 1]; vb[k][j] = row[3 * dx + 2];
					}
				}
			}
			snap_representative4(vl, va, vb, count, to);
		}
	}
	for (; c < cells; c++) {
		int x = c % n, y = c / n, k = 0;
		for (int dy = 0; dy < factor; dy++) {
			const double *row = lab + 3 * ((size_t)(y * factor + dy) * side + x * factor);
			for (int dx = 0; dx < factor; dx++, k++) {
				pl[k] = row[3 * dx]; pa[k] = row[3 * dx + 1]; pb[k] = row[3 * dx + 2];
			}
		}
		snap_representative(pl, pa, pb, count, nearer, out + 3 * (size_t)c);
	}
}

#if SNAP_DISPATCH
__attribute__((target("avx2"))) static void
snap_drawn_cells_avx2(const double *lab, int side, int factor, double *scratch, double *out)
{
	snap_drawn_cells_body(lab, side, factor, scratch, out);
}
#endif

void
snap_drawn_cells(const double *lab, int side, int factor, double *scratch, double *out)
{
#if SNAP_DISPATCH
	if (snap_cpu_has_avx2()) { snap_drawn_cells_avx2(lab, side, factor, scratch, out); return; }
#endif
	snap_drawn_cells_body(lab, side, factor, scratch, out);
}

/* Lloyd's rounds. The nearest centre of every point is found centre by centre over
 * all points (a loop the compiler vectorises): each point still meets the centres
 * in order and keeps the first of equal distances, as the Swift loop did. */
SNAP_INLINE void
snap_kmeans_body(const double *restrict pl, const double *restrict pa, const double *restrict pb, long count,
		 double *restrict centres, int k, int iterations, long *restrict assignment, long *restrict best,
		 double *restrict nearest, double *restrict sums, long *restrict counts)
{
	for (int iteration = 0; iteration < iterations; iteration++) {
		for (long i = 0; i < count; i++) { nearest[i] = INFINITY; best[i] = 0; }
		for (int j = 0; j < k; j++) {
			double cl = centres[3 * j], ca = centres[3 * j + 1], cb = centres[3 * j + 2];
			for (long i = 0; i < count; i++) {
				double dl = pl[i] - cl, da = pa[i] - ca, db = pb[i] - cb;
				double d = dl * dl + da * da + db * db;
				int less = d < nearest[i];
				nearest[i] = less ? d : nearest[i];
				best[i] = less ? j : best[i];
			}
		}
		int changed = 0;
		for (long i = 0; i < count; i++) {
			if (assignment[i] != best[i]) { assignment[i] = best[i]; changed = 1; }
		}
		for (int j = 0; j < 3 * k; j++) sums[j] = 0.0;
		for (int j = 0; j < k; j++) counts[j] = 0;
		for (long i = 0; i < count; i++) {
			long j = assignment[i];
			sums[3 * j] += pl[i]; sums[3 * j + 1] += pa[i]; sums[3 * j + 2] += pb[i]; counts[j]++;
		}
		for (int j = 0; j < k; j++) {
			if (counts[j] > 0) {
				double n = (double)counts[j];
				centres[3 * j] = sums[3 * j] / n;
				centres[3 * j + 1] = sums[3 * j + 1] / n;
				centres[3 * j + 2] = sums[3 * j + 2] / n;
			}
		}
		if (!changed) break;
	}
}

#if SNAP_DISPATCH
__attribute__((target("avx2"))) static void
snap_kmeans_avx2(const double *pl, const double *pa, const double *pb, long count, double *centres, int k, int iterations,
		 long *assignment, long *best, double *nearest, double *sums, long *counts)
{
	snap_kmeans_body(pl, pa, pb, count, centres, k, iterations, assignment, best, nearest, sums, counts);
}
#endif

void
snap_kmeans_refine(const double *pl, const double *pa, const double *pb, long count, double *centres, int k, int iterations,
		   long *scratch, double *work)
{
	long *assignment = scratch, *best = scratch + count, *counts = scratch + 2 * count;
	double *nearest = work, *sums = work + count;
	for (long i = 0; i < count; i++) assignment[i] = 0;
#if SNAP_DISPATCH
	if (snap_cpu_has_avx2()) {
		snap_kmeans_avx2(pl, pa, pb, count, centres, k, iterations, assignment, best, nearest, sums, counts);
		return;
	}
#endif
	snap_kmeans_body(pl, pa, pb, count, centres, k, iterations, assignment, best, nearest, sums, counts);
}


/* OKLab.inGamut of four colours, lane by lane: each lane all ones when its linear sRGB
 * lies within -1e-4 ... 1 + 1e-4 (ordered comparisons: a NaN is outside, as in Swift). */
SNAP_INLINE snap_v4l
snap_in_gamut4(snap_v4d l, snap_v4d a, snap_v4d b)
{
	snap_v4d l1 = l + 0.3963377774 * a + 0.2158037573 * b;
	snap_v4d m1 = l - 0.1055613458 * a - 0.0638541728 * b;
	snap_v4d s1 = l - 0.0894841775 * a - 1.2914855480 * b;
	snap_v4d l3 = l1 * l1 * l1, m3 = m1 * m1 * m1, s3 = s1 * s1 * s1;
	snap_v4d c0 = 4.0767416621 * l3 - 3.3077115913 * m3 + 0.2309699292 * s3;
	snap_v4d c1 = -1.2684380046 * l3 + 2.6097574011 * m3 - 0.3413193965 * s3;
	snap_v4d c2 = -0.0041960863 * l3 - 0.7034186147 * m3 + 1.7076147010 * s3;
	const double e = 1e-4, top = 1 + e;
	return (c0 >= -e) & (c0 <= top) & (c1 >= -e) & (c1 <= top) & (c2 >= -e) & (c2 <= top);
}

/* The chroma scale of up to four colours outside the gamut, out[3 p] (lightness, clamped)
 * with out[3 p + 1], out[3 p + 2] for p in pending: sixteen halvings, lane by lane; a and b
 * are then scaled by it in place. Unused lanes hold black, whose steps are thrown away. */
SNAP_INLINE void
snap_gamut_squeeze(double *out, const long *pending, int waiting)
{
	snap_v4d l = {0, 0, 0, 0}, a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
	for (int k = 0; k < waiting; k++) {
		l[k] = out[3 * pending[k]]; a[k] = out[3 * pending[k] + 1]; b[k] = out[3 * pending[k] + 2];
	}
	snap_v4d low = {0, 0, 0, 0}, high = {1, 1, 1, 1};
	for (int step = 0; step < 16; step++) {
		snap_v4d mid = (low + high) / 2;
		snap_v4l fits = snap_in_gamut4(l, a * mid, b * mid);
		low = (snap_v4d)((fits & (snap_v4l)mid) | (~fits & (snap_v4l)low));
		high = (snap_v4d)((fits & (snap_v4l)high) | (~fits & (snap_v4l)mid));
	}
	for (int k = 0; k < waiting; k++) {
		out[3 * pending[k] + 1] = a[k] * low[k];
		out[3 * pending[k] + 2] = b[k] * low[k];
	}
}

/* OKLab.clippedToGamut of count interleaved colours: lightness clamped to 0...1 (Swift's max
 * then min, which keep -0.0), the gamut test four at a time; a colour inside keeps its a and b
 * (not a * 1, which is the same bits anyway), and the colours outside go four at a time
 * through the sixteen halvings of the chroma scale (`snap_gamut_squeeze`). Each lane's steps
 * are its own, so each result is the Swift one's bits; gathering the colours outside (a
 * quarter or so of a grid's, scattered) saves the halvings of groups that were mostly inside. */
SNAP_INLINE void
snap_gamut_clip_body(const double *in, long count, double *out)
{
	long pending[4];
	int waiting = 0;
	for (long i = 0; i < count; i += 4) {
		int n = count - i < 4 ? (int)(count - i) : 4;
		snap_v4d l = {0, 0, 0, 0}, a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
		for (int k = 0; k < n; k++) {
			double v = in[3 * (i + k)];
			v = v >= 0.0 ? v : 0.0;
			l[k] = v < 1.0 ? v : 1.0;
			a[k] = in[3 * (i + k) + 1];
			b[k] = in[3 * (i + k) + 2];
		}
		snap_v4l inside = snap_in_gamut4(l, a, b);
		for (int k = 0; k < n; k++) {
			out[3 * (i + k)] = l[k];
			out[3 * (i + k) + 1] = a[k];
			out[3 * (i + k) + 2] = b[k];
			if (!inside[k]) {
				pending[waiting++] = i + k;
				if (waiting == 4) { snap_gamut_squeeze(out, pending, 4); waiting = 0; }
			}
		}
	}
	if (waiting > 0) snap_gamut_squeeze(out, pending, waiting);
}

#if SNAP_DISPATCH
__attribute__((target("avx2"))) static void
snap_gamut_clip_avx2(const double *in, long count, double *out)
{
	snap_gamut_clip_body(in, count, out);
}
#endif

void
snap_gamut_clip(const double *in, long count, double *out)
{
#if SNAP_DISPATCH
	if (snap_cpu_has_avx2()) { snap_gamut_clip_avx2(in, count, out); return; }
#endif
	snap_gamut_clip_body(in, count, out);
}

/* The nearest of k interleaved centres to each of count interleaved points: the first of
 * equal squared distances (dl * dl + da * da + db * db, point minus centre, as
 * OKLab.distanceSquared), its index in best and its distance in distance (INFINITY and 0
 * when k is 0). Centre by centre over all points, as the k-means rounds: each point still
 * meets the centres in order, so it is the Swift loop's choice. */
SNAP_INLINE void
snap_nearest_body(const double *restrict points, long count, const double *restrict centres, int k, long *restrict best,
		  double *restrict distance)
{
	for (long i = 0; i < count; i++) { distance[i] = INFINITY; best[i] = 0; }
	for (int j = 0; j < k; j++) {
		double cl = centres[3 * j], ca = centres[3 * j + 1], cb = centres[3 * j + 2];
		for (long i = 0; i < count; i++) {
			double dl = points[3 * i] - cl, da = points[3 * i + 1] - ca, db = points[3 * i + 2] - cb;
			double d = dl * dl + da * da + db * db;
			int less = d < distance[i];
			distance[i] = less ? d : distance[i];
			best[i] = less ? j : best[i];
		}
	}
}

#if SNAP_DISPATCH
__attribute__((target("avx2"))) static void
snap_nearest_avx2(const double *points, long count, const double *centres, int k, long *best, double *distance)
{
	snap_nearest_body(points, count, centres, k, best, distance);
}
#endif

void
snap_nearest(const double *points, long count, const double *centres, int k, long *best, double *distance)
{
#if SNAP_DISPATCH
	if (snap_cpu_has_avx2()) { snap_nearest_avx2(points, count, centres, k, best, distance); return; }
#endif
	snap_nearest_body(points, count, centres, k, best, distance);
}

/* The box (point indices) in the order of values[index], then of the index: the median
 * cut's order. The order is total (finite values, distinct indices), so any correct sort
 * gives it; this one is a merge sort of runs of 16 sorted by insertion, skipped when the box
 * is in order already. */
static inline int
snap_keyed_before(double ka, long ia, double kb, long ib)
{
	return ka < kb || (ka == kb && ia < ib);
}

void
snap_sort_box(const double *values, long *box, long n, double *keys, double *keys2, long *box2)
{
	for (long i = 0; i < n; i++) keys[i] = values[box[i]];
	/* A half of a box split on the same axis before is in order already (the median cut
	 * often splits on lightness several times running): one pass says so. */
	long sorted = 1;
	for (long i = 1; i < n; i++) sorted &= !snap_keyed_before(keys[i], box[i], keys[i - 1], box[i - 1]);
	if (sorted) return;
	const long run = 16;
	for (long start = 0; start < n; start += run) {
		long end = start + run < n ? start + run : n;
		for (long i = start + 1; i < end; i++) {
			double k = keys[i];
			long v = box[i], j = i;
			while (j > start && snap_keyed_before(k, v, keys[j - 1], box[j - 1])) {
				keys[j] = keys[j - 1]; box[j] = box[j - 1]; j--;
			}
			keys[j] = k; box[j] = v;
		}
	}
	double *fk = keys, *tk = keys2;
	long *fb = box, *tb = box2;
	for (long width = run; width < n; width *= 2) {
		for (long lo = 0; lo < n; lo += 2 * width) {
			long mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
			long i = lo, j = mid, o = lo;
			while (i < mid && j < hi) {
				if (snap_keyed_before(fk[j], fb[j], fk[i], fb[i])) { tk[o] = fk[j]; tb[o++] = fb[j++]; }
				else { tk[o] = fk[i]; tb[o++] = fb[i++]; }
			}
			while (i < mid) { tk[o] = fk[i]; tb[o++] = fb[i++]; }
			while (j < hi) { tk[o] = fk[j]; tb[o++] = fb[j++]; }
		}
		double *sk = fk; fk = tk; tk = sk;
		long *sb = fb; fb = tb; tb = sb;
	}
	if (fb != box) memcpy(box, fb, (size_t)n * sizeof *box);
}

/* The box rearranged so that its first kth indices are the kth first in the median cut's
 * order (values[index], then index), in no particular order, and the rest after them
 * (quickselect; keys: n doubles of scratch). The order is total, so the two sets are the
 * sorted box's halves whatever the pivots. */
void
snap_select_box(const double *values, long *box, long n, long kth, double *keys)
{
	for (long i = 0; i < n; i++) keys[i] = values[box[i]];
	long lo = 0, hi = n - 1;
	while (lo < hi) {
		long mid = lo + (hi - lo) / 2;
		double pk = keys[mid];
		long pb = box[mid];
		keys[mid] = keys[hi]; box[mid] = box[hi]; keys[hi] = pk; box[hi] = pb;
		long store = lo;
		for (long i = lo; i < hi; i++) {
			if (snap_keyed_before(keys[i], box[i], pk, pb)) {
				double tk = keys[i]; long tb = box[i];
				keys[i] = keys[store]; box[i] = box[store]; keys[store] = tk; box[store] = tb;
				store++;
			}
		}
		keys[hi] = keys[store]; box[hi] = box[store]; keys[store] = pk; box[store] = pb;
		if (store == kth) return;
		if (kth < store) hi = store - 1; else lo = store + 1;
	}
}

/* Each factor x factor block's rounded mean of packed 8-bit RGB, side x side pixels, band by
 * band: (sum + area / 2) / area, as DrawnGrid.areaAverage (integers: exact). */
void
snap_area_means(const unsigned char *rgb, int side, int factor, unsigned char *out)
{
	int n = side / factor;
	long area = (long)factor * factor;
	for (int cy = 0; cy < n; cy++) {
		for (int cx = 0; cx < n; cx++) {
			long r = 0, g = 0, b = 0;
			for (int y = cy * factor; y < (cy + 1) * factor; y++) {
				const unsigned char *p = rgb + 3 * ((size_t)y * side + (size_t)cx * factor);
				for (int x = 0; x < factor; x++) { r += p[3 * x]; g += p[3 * x + 1]; b += p[3 * x + 2]; }
			}
			unsigned char *o = out + 3 * ((size_t)cy * n + cx);
			o[0] = (unsigned char)((r + area / 2) / area);
			o[1] = (unsigned char)((g + area / 2) / area);
			o[2] = (unsigned char)((b + area / 2) / area);
		}
	}
}

/* Lanczos3 square resampling and orientation of packed RGB (no library). */
#define _GNU_SOURCE 1
#include "snapshim.h"

#include <stdlib.h>
#include <string.h>
#include <math.h>

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

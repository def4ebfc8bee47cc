/*
 * kernelshim: SnapThumb's pure C kernels, which call no library: resampling and
 * orienting packed RGB (resample.c), the drawn pixel art's OKLab arithmetic (oklab.c),
 * and what every C target of SnapThumb shares (base.c: the processor's features, free).
 * The lowest C layer: the JPEG, libvips and codec targets build on it.
 */
#ifndef SNAP_KERNELSHIM_H
#define SNAP_KERNELSHIM_H

#include <stddef.h>
#include <stdint.h>

/* ==== Shared by SnapThumb's C targets (base.c) ==== */

/* Frees memory a snap_* function allocated with malloc (decoded pixels, written files, messages). */
void snap_free(void *p);
#if defined(__x86_64__) && defined(__clang__)
/* 1 when this processor has AVX2 (asked once): the kernels of oklab.c and resample.c
 * then run their AVX2 builds, which compute the same bits. */
int snap_cpu_has_avx2(void);
#endif

/* ==== Resampling packed RGB (resample.c) ==== */

/* The exact centre side×side square of packed 8-bit RGB (width×height), scaled
 * to fill (Lanczos3, widened when shrinking), like vips_thumbnail_image's centre
 * crop but without rounding the crop to whole pixels, and without a libvips pipeline: that costs more than the pixels
 * on a 135×180 image. Returns 0, or -1 when memory runs out. */
int snap_square_rgb(const unsigned char *rgb, int width, int height, int side, unsigned char *out);
/* The same square of a width × height image of which only a part is in memory:
 * rgb holds region_width × region_height pixels starting at (left, top). Fails
 * (-2) if the square's taps reach outside that part. */
int snap_square_rgb_region(const unsigned char *rgb, int region_width, int region_height, int left, int top,
                           int width, int height, int side, unsigned char *out);
/* Packed 8-bit RGB turned upright: rotated clockwise by rotate (0, 90, 180 or
 * 270) degrees, then mirrored left-right when flip is set, as vips_rot then
 * vips_flip do. out holds width*height*3 bytes; it is height wide after 90 or 270. */
/* Neighbour sums of packed RGB side×side for the JPEG size prediction (see resample.c). */
void snap_pixel_steps(const unsigned char *rgb, int side, long *luma, long *chroma, long *second,
                      long *flat, long *squares);
void snap_orient_rgb(const unsigned char *rgb, int width, int height, int rotate, int flip, unsigned char *out);

/* ==== The drawn pixel art (oklab.c) ==== */


/* The drawn pixel art's arithmetic in OKLab (oklab.c), bit for bit as SnapThumbCore's
 * Swift: OKLab of count packed 8-bit sRGB pixels (linear: the 256-entry sRGB-to-linear
 * table), interleaved l, a, b; */
void snap_oklab_image(const unsigned char *rgb, long count, const double *linear, double *lab);
/* each factor x factor block's representative colour (DrawnGrid.representative) of a
 * side x side OKLab image, (side / factor)^2 cells, interleaved (scratch: 4 factor^2); */
void snap_drawn_cells(const double *lab, int side, int factor, double *scratch, double *out);
/* OKLab.clippedToGamut of count interleaved colours (in and out may not overlap); */
void snap_gamut_clip(const double *in, long count, double *out);
/* Lloyd's k-means from k interleaved centres (updated in place) over count points
 * (components pl, pa, pb), as OKLabQuantizer.kMeans (scratch: 2 count + k longs;
 * work: count + 3 k doubles). */
void snap_kmeans_refine(const double *pl, const double *pa, const double *pb, long count, double *centres, int k, int iterations,
			long *scratch, double *work);
/* The nearest of k interleaved centres to each of count interleaved points (the first of
 * equals; OKLab.distanceSquared): its index in best, its squared distance in distance; */
void snap_nearest(const double *points, long count, const double *centres, int k, long *best, double *distance);
/* the n point indices of box sorted by values[index], then index (the median cut's order;
 * keys, keys2: n doubles, box2: n longs of scratch); */
void snap_sort_box(const double *values, long *box, long n, double *keys, double *keys2, long *box2);
/* the box's indices rearranged so that its first kth are the first kth of that order, in no
 * particular order (keys: n doubles of scratch); */
void snap_select_box(const double *values, long *box, long n, long kth, double *keys);
/* each factor x factor block's rounded mean of side x side packed 8-bit RGB ((side / factor)^2
 * pixels out). */
void snap_area_means(const unsigned char *rgb, int side, int factor, unsigned char *out);


#endif

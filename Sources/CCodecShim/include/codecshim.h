/*
 * codecshim: helpers for the palette PNG's libraries: libimagequant (the adaptive
 * palette) and zlib (deflate, CRC-32), and the PNG rows' index packing.
 */
#ifndef SNAP_CODECSHIM_H
#define SNAP_CODECSHIM_H

#include <stddef.h>
#include <stdint.h>

/* ==== libimagequant (imagequant.c) ==== */

/* libimagequant: an adaptive palette of at most max_colours for packed RGBA
 * pixels. Writes RGBA entries to palette (256*4 bytes) and the count.
 * Runs libimagequant single-threaded (its OpenMP threads cost time and make
 * float reductions order-dependent on 625-pixel images). */
int snap_quantize_palette(const unsigned char *rgba, int width, int height, int max_colours,
                          int speed, unsigned char *palette, int *count);
const char *snap_liq_version(void);

/* ==== zlib (zlib.c) ==== */

/* zlib. */
unsigned long snap_crc32(unsigned long crc, const void *data, size_t len);
/* Deflate into out (capacity *out_len, set to the size written); 0 or -1. */
int snap_deflate(const void *in, size_t in_len, int level, int strategy, void *out, size_t *out_len);
size_t snap_deflate_bound(size_t in_len);
const char *snap_zlib_version(void);

/* Palette indices packed depth bits each (1, 2, 4 or 8), most significant first, each
 * row of width indices into (width * depth + 7) / 8 bytes: the PNG's rows unfiltered. */
void snap_pack_indices(const unsigned char *indices, int width, int height, int depth, unsigned char *out);

#endif

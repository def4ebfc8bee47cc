/* The baseline Huffman decoder that stands in for libjpeg's (jpeg_entropy.c). */
#ifndef SNAP_JPEG_ENTROPY_H
#define SNAP_JPEG_ENTROPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jpeglib.h>
#include <jpegint.h>

enum { SNAP_ENTROPY_OK = 0, SNAP_ENTROPY_DEFER = 1 };

/* A Huffman table's canonical code (for codes longer than a look-up). */
struct snap_huff {
	int maxcode[18];
	int valoffset[18];
	uint8_t huffval[256];
};
/* The look-ups: see jpeg_entropy.c. */
struct snap_dc_table {
	struct snap_huff code;
	uint32_t look[1 << 9];
};
struct snap_ac_table {
	struct snap_huff code;
	uint32_t look[1 << 12];
};

struct snap_entropy {
	struct snap_dc_table dc_tables[NUM_HUFF_TBLS];
	struct snap_ac_table ac_tables[NUM_HUFF_TBLS];
	char dc_used[NUM_HUFF_TBLS], ac_used[NUM_HUFF_TBLS];
	const struct snap_dc_table *block_dc[D_MAX_BLOCKS_IN_MCU];
	const struct snap_ac_table *block_ac[D_MAX_BLOCKS_IN_MCU];
	int block_component[D_MAX_BLOCKS_IN_MCU];
	char dc_needed[D_MAX_BLOCKS_IN_MCU], ac_needed[D_MAX_BLOCKS_IN_MCU];
	int blocks;
	const uint8_t *next, *end;   /* the entropy-coded data not yet in `acc` */
	uint64_t acc;                /* the next bits, first at the top */
	int bits;                    /* bits in acc, padding included */
	int pad;                     /* zero bits after a marker at the bottom of acc */
	int marker;                  /* the marker code that ends the data; -1 the buffer's end */
	const uint8_t *marker_at;
	const uint8_t *safe;         /* 8 bytes from here hold no 0xFF (NULL: none)*/
	int last_dc[MAX_COMPS_IN_SCAN];
	unsigned int restart_interval, restarts_to_go;
	int next_restart;
};

/* After jpeg_start_decompress of a single-scan baseline file: builds the tables
 * and reads from the source's position. -1 for files it does not decode
 * (progressive, arithmetic, several scans, ...): leave those to libjpeg. */
int snap_entropy_start(struct snap_entropy *e, j_decompress_ptr c);
/* libjpeg's decode_mcu: the coefficients of one MCU into `blocks` (NULL to skip
 * them). SNAP_ENTROPY_DEFER: this file must be decoded by libjpeg instead. */
int snap_entropy_decode_mcu(struct snap_entropy *e, JBLOCKROW *blocks);

/* After snap_entropy_start succeeded: libjpeg's coefficient controller for this
 * scan becomes ours (jpeg_idct.c), with the 2×2 and 4×4 IDCTs in pairs. -1 where
 * it does not apply (no AVX2, buffered or multi-scan, an unknown layout). */
int snap_coef_install(j_decompress_ptr c);

#endif

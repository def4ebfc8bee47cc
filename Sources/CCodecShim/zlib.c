/* zlib: CRC-32 and deflate for the palette PNGs. */
#define _GNU_SOURCE 1
#include "codecshim.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

unsigned long snap_crc32(unsigned long crc, const void *data, size_t len)
{ return crc32(crc, data, (uInt) len); }

size_t snap_deflate_bound(size_t in_len) { return compressBound((uLong) in_len); }

int
snap_deflate(const void *in, size_t in_len, int level, int strategy, void *out, size_t *out_len)
{
	z_stream s;
	memset(&s, 0, sizeof s);
	/* The smallest window that still reaches back over the whole input (zlib keeps
	 * 262 bytes of lookahead), so the matches found are the same as with 32 KiB;
	 * setting up the default 32 KiB window and 128 KiB hash for a 5 KB palette PNG
	 * cost more than compressing it. */
	int bits = 9;
	while (bits < 15 && ((size_t) 1 << bits) < in_len + 262) bits++;
	if (deflateInit2(&s, level, Z_DEFLATED, bits, 8, strategy) != Z_OK)
		return -1;
	s.next_in = (Bytef *) in;
	s.avail_in = (uInt) in_len;
	s.next_out = out;
	s.avail_out = (uInt) *out_len;
	int r = deflate(&s, Z_FINISH);
	*out_len = s.total_out;
	deflateEnd(&s);
	return r == Z_STREAM_END ? 0 : -1;
}

const char *snap_zlib_version(void) { return zlibVersion(); }

void
snap_pack_indices(const unsigned char *indices, int width, int height, int depth, unsigned char *out)
{
	int per_byte = 8 / depth, row_bytes = (width * depth + 7) / 8;
	if (depth == 4) {
		/* Two indices a byte (16 colours, the default): the loop below for
		 * per_byte 2, written out so that it vectorises; the same bytes. */
		for (int y = 0; y < height; y++) {
			const unsigned char *in = indices + (size_t) y * width;
			unsigned char *row = out + (size_t) y * row_bytes;
			int pairs = width / 2;
			for (int byte = 0; byte < pairs; byte++)
				row[byte] = (unsigned char) (((unsigned) in[2 * byte] << 4) | (unsigned) in[2 * byte + 1]);
			if (width % 2)
				row[pairs] = (unsigned char) ((unsigned) in[width - 1] << 4);
		}
		return;
	}
	for (int y = 0; y < height; y++) {
		const unsigned char *in = indices + (size_t) y * width;
		unsigned char *row = out + (size_t) y * row_bytes;
		for (int byte = 0, x = 0; byte < row_bytes; byte++) {
			unsigned packed = 0;
			for (int k = 0; k < per_byte && x < width; k++, x++)
				packed |= (unsigned) in[x] << ((per_byte - 1 - k) * depth);
			row[byte] = (unsigned char) packed;
		}
	}
}

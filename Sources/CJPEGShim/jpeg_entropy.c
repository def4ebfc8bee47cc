/* A faster Huffman decoder for libjpeg's baseline scans: libjpeg keeps doing the
 * rest (markers, IDCT, upsampling, colour), and its coefficients come out the same.
 *
 * libjpeg-turbo decodes one Huffman symbol per table look-up and then reads the
 * coefficient's magnitude bits in a second step; with restart markers it always
 * takes its slower, bit-checked path. Here one look-up of the next 12 bits gives
 * up to two whole coefficients (run, value) and the end of the block, the DC
 * look-up its value too, the bit buffer is topped up with 8 bytes before every
 * look-up, without a test, as far as the next 0xFF byte (found ahead with
 * memchr), and restart markers cost nothing on the way. On 1080×1440
 * snaps the entropy decoding takes about a third less CPU than libjpeg-turbo 2.1's.
 *
 * The coefficients written are libjpeg's: same table semantics (a prefix code
 * decodes one way), same natural-order table with its guard entries for a run
 * past the block's end, same DC arithmetic. Everything libjpeg would warn about
 * or recover from (a bad code, bits wanted past a marker, a restart marker out
 * of place, bytes between the data and a restart marker, the end of the buffer
 * before a marker) is not decoded here: the call returns SNAP_ENTROPY_DEFER and
 * the caller decodes the whole image again with libjpeg's own decoder, so its
 * warnings and its output decide such files exactly as before. */
#define _GNU_SOURCE 1
#include "jpeg_entropy.h"

#include <string.h>

#define AC_BITS 12
#define DC_BITS 9

/* DC look-up entries (9 bits): the bits to drop in bits 0-4; with KIND_PART
 * only the code is dropped and the magnitude's size is in bits 8-11, otherwise
 * the value is in bits 16-31; KIND_PART with length 0: a longer code. */
enum { KIND_PART = 3 << 5, KIND_MASK = 3 << 5 };

/* AC look-up entries (12 bits, 32 bits each) decode up to two coefficients and
 * the end of the block at once: bits 0-3 the bits to drop, 4-9 the span (the sum
 * of the coefficients' advances, run + 1 each), 10-14 the first coefficient's
 * advance, bit 15 the end of the block, the values in bits 16-23 and 24-31 (the
 * first repeated when there is no second; a value past ±127 is left to the slow
 * way). An end of block alone has advance 0: its stores go to a scratch block, so
 * that the decoding loop has one way out of a block. A code whose magnitude does
 * not fit (its symbol in bits 16-23), a ZRL, and a code longer than 12 bits
 * (length 0) have span 63 (AC_SLOW): the one test of the span against the
 * block's end sends them the slow way. */
#define AC_END (1u << 15)
#define AC_SLOW (63u << 4)

static inline int
snap_extend(unsigned int v, int s)
{
	/* HUFF_EXTEND: a magnitude below 2^(s-1) is negative. */
	return v < (1u << (s - 1)) ? (int) v + (int) ((~0u << s) + 1) : (int) v;
}

/* Every code of `h` up to `width` bits, as a `width`-bit look-up of
 * length | symbol << 8 (0 where a longer code starts): each code fills the
 * entries it is a prefix of. */
static void
snap_short_codes(const JHUFF_TBL *h, int width, uint16_t *single)
{
	memset(single, 0, sizeof(uint16_t) << width);
	unsigned int code = 0;
	int p = 0;
	for (int l = 1; l <= width; l++, code <<= 1)
		for (int n = h->bits[l]; n > 0; n--, code++, p++)
			for (unsigned int i = code << (width - l), last = (code + 1) << (width - l); i < last; i++)
				single[i] = (uint16_t) (l | h->huffval[p] << 8);
}

/* The canonical code of `h` (Figures C.1 and F.15 of the standard, as libjpeg
 * derives it). Returns -1 when the table is not one libjpeg accepted. */
static int
snap_entropy_code(const JHUFF_TBL *h, int dc, struct snap_huff *t)
{
	if (!h)
		return -1;
	int p = 0;
	unsigned int code = 0;
	for (int l = 1; l <= 16; l++) {
		int n = h->bits[l];
		if (p + n > 256)
			return -1;
		if (n) {
			t->valoffset[l] = p - (int) code;
			code += (unsigned int) n;
			p += n;
			t->maxcode[l] = (int) code - 1;
		} else
			t->maxcode[l] = -1;
		if (code > (1u << l))
			return -1;
		code <<= 1;
	}
	t->maxcode[17] = 0x7FFFFFFF;
	t->valoffset[17] = 0;
	memcpy(t->huffval, h->huffval, sizeof(t->huffval));
	if (dc)
		for (int i = 0; i < p; i++)
			if (h->huffval[i] > 15)
				return -1;
	return 0;
}

/* A DC table: its code and look-up. */
static int
snap_entropy_dc_table(const JHUFF_TBL *h, struct snap_dc_table *t)
{
	if (snap_entropy_code(h, 1, &t->code) != 0)
		return -1;
	uint16_t single[1 << DC_BITS];
	snap_short_codes(h, DC_BITS, single);
	for (unsigned int i = 0; i < (1u << DC_BITS); i++) {
		int l = single[i] & 31, s = single[i] >> 8;
		if (l == 0)
			t->look[i] = KIND_PART;
		else if (l + s <= DC_BITS) {
			unsigned int v = s ? (i >> (DC_BITS - l - s)) & ((1u << s) - 1) : 0;
			int value = s ? snap_extend(v, s) : 0;
			t->look[i] = (uint32_t) (l + s) | (uint32_t) (uint16_t) (int16_t) value << 16;
		} else
			t->look[i] = (uint32_t) l | KIND_PART | (uint32_t) s << 8;
	}
	return 0;
}

/* An AC table: its code and look-up. */
static int
snap_entropy_ac_table(const JHUFF_TBL *h, struct snap_ac_table *t)
{
	if (snap_entropy_code(h, 0, &t->code) != 0)
		return -1;
	/* One symbol per index first (length | symbol << 8), then the entries. */
	uint16_t single[1 << AC_BITS];
	snap_short_codes(h, AC_BITS, single);
	for (unsigned int i = 0; i < (1u << AC_BITS); i++) {
		int l = single[i] & 31, sym = single[i] >> 8;
		if (l == 0) {
			t->look[i] = AC_SLOW;
			continue;
		}
		int r = sym >> 4, s = sym & 15;
		if (s == 0 && r != 15) {
			/* Any size-0 symbol but ZRL ends the block, as in libjpeg. */
			t->look[i] = (uint32_t) l | AC_END;
			continue;
		}
		if (s == 0 || s > 7 || l + s > AC_BITS) {
			t->look[i] = (uint32_t) l | AC_SLOW | (uint32_t) sym << 16;
			continue;
		}
		int used = l + s;
		int v1 = snap_extend((i >> (AC_BITS - used)) & ((1u << s) - 1), s), v2 = v1;
		unsigned int advance1 = (unsigned int) r + 1, advance2 = 0, end = 0;
		/* What follows in the same bits: a second coefficient, an end of block. */
		for (int step = 0; step < 2 && used < AC_BITS; step++) {
			int rest = AC_BITS - used;
			unsigned int follow = single[(i << used) & ((1u << AC_BITS) - 1)];
			int l2 = follow & 31, sym2 = follow >> 8;
			if (l2 == 0 || l2 > rest)
				break;
			int r2 = sym2 >> 4, s2 = sym2 & 15;
			if (s2 == 0) {
				if (r2 != 15) {
					end = AC_END;
					used += l2;
				}
				break;
			}
			if (step == 1 || s2 > 7 || l2 + s2 > rest)
				break;
			used += l2 + s2;
			v2 = snap_extend((i >> (AC_BITS - used)) & ((1u << s2) - 1), s2);
			advance2 = (unsigned int) r2 + 1;
		}
		t->look[i] = (uint32_t) used | (advance1 + advance2) << 4 | advance1 << 10 | end |
			(uint32_t) (uint8_t) (int8_t) v1 << 16 | (uint32_t) (uint8_t) (int8_t) v2 << 24;
	}
	return 0;
}

/* The last position from which 8 bytes can be read without meeting a 0xFF byte
 * (a stuffed byte or a marker) or the end; NULL after a marker. */
static const uint8_t *
snap_entropy_safe(const struct snap_entropy *e)
{
	if (e->marker)
		return NULL;
	const uint8_t *ff = memchr(e->next, 0xFF, (size_t) (e->end - e->next));
	if (!ff)
		ff = e->end;
	return ff - e->next >= 8 ? ff - 8 : NULL;
}

/* The state at the start of the scan or after a restart marker: the data from
 * `next`, an empty bit buffer, DC predictions 0, a full restart interval. */
static void
snap_entropy_reset(struct snap_entropy *e, const uint8_t *next)
{
	e->next = next;
	e->acc = 0;
	e->bits = 0;
	e->pad = 0;
	e->marker = 0;
	e->marker_at = NULL;
	for (int i = 0; i < MAX_COMPS_IN_SCAN; i++)
		e->last_dc[i] = 0;
	e->restarts_to_go = e->restart_interval;
	e->safe = snap_entropy_safe(e);
}

/* The tables of the last two DC and two AC Huffman tables this thread decoded
 * with: cameras and most encoders write the same standard tables into every
 * file, and building the look-ups took about 0.6 % of a backfill. A hit is
 * copied. Fixed arrays, no malloc: nothing to free when a thread ends. */
#define SNAP_TABLE_CACHE 2
struct snap_table_key {
	unsigned long used;          /* when it last served (a per-thread clock); 0: empty */
	UINT8 bits[17];
	UINT8 huffval[256];
};
static __thread struct { struct snap_table_key key; struct snap_dc_table table; } snap_dc_cache[SNAP_TABLE_CACHE];
static __thread struct { struct snap_table_key key; struct snap_ac_table table; } snap_ac_cache[SNAP_TABLE_CACHE];
static __thread unsigned long snap_tables_clock;

static int
snap_table_hit(struct snap_table_key *key, const JHUFF_TBL *h)
{
	if (!key->used || memcmp(key->bits, h->bits, sizeof(key->bits)) != 0 ||
		memcmp(key->huffval, h->huffval, sizeof(key->huffval)) != 0)
		return 0;
	key->used = ++snap_tables_clock;
	return 1;
}

static void
snap_table_keep(struct snap_table_key *key, const JHUFF_TBL *h)
{
	key->used = ++snap_tables_clock;
	memcpy(key->bits, h->bits, sizeof(key->bits));
	memcpy(key->huffval, h->huffval, sizeof(key->huffval));
}

/* Both caches are searched and filled alike (the least recently used slot goes). */
#define SNAP_CACHED_TABLE(cache, build, h, t) do { \
	for (int i_ = 0; i_ < SNAP_TABLE_CACHE; i_++) \
		if (snap_table_hit(&cache[i_].key, h)) { \
			memcpy(t, &cache[i_].table, sizeof(*(t))); \
			return 0; \
		} \
	if (build(h, t) != 0) \
		return -1; \
	int slot_ = cache[1].key.used < cache[0].key.used ? 1 : 0; \
	snap_table_keep(&cache[slot_].key, h); \
	memcpy(&cache[slot_].table, t, sizeof(*(t))); \
	return 0; \
} while (0)

static int
snap_cached_dc(const JHUFF_TBL *h, struct snap_dc_table *t)
{
	if (!h)
		return -1;
	SNAP_CACHED_TABLE(snap_dc_cache, snap_entropy_dc_table, h, t);
}

static int
snap_cached_ac(const JHUFF_TBL *h, struct snap_ac_table *t)
{
	if (!h)
		return -1;
	SNAP_CACHED_TABLE(snap_ac_cache, snap_entropy_ac_table, h, t);
}

int
snap_entropy_start(struct snap_entropy *e, j_decompress_ptr c)
{
	if (c->progressive_mode || c->arith_code || c->data_precision != 8 ||
		jpeg_has_multiple_scans(c) || c->comps_in_scan != c->num_components ||
		c->blocks_in_MCU < 1 || c->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU ||
		c->src == NULL || c->unread_marker != 0)
		return -1;
	memset(e->dc_used, 0, sizeof(e->dc_used));
	memset(e->ac_used, 0, sizeof(e->ac_used));
	for (int b = 0; b < c->blocks_in_MCU; b++) {
		int ci = c->MCU_membership[b];
		if (ci < 0 || ci >= c->comps_in_scan)
			return -1;
		jpeg_component_info *comp = c->cur_comp_info[ci];
		int d = comp->dc_tbl_no, a = comp->ac_tbl_no;
		if (d < 0 || d >= NUM_HUFF_TBLS || a < 0 || a >= NUM_HUFF_TBLS)
			return -1;
		if (!e->dc_used[d] && snap_cached_dc(c->dc_huff_tbl_ptrs[d], &e->dc_tables[d]) != 0)
			return -1;
		if (!e->ac_used[a] && snap_cached_ac(c->ac_huff_tbl_ptrs[a], &e->ac_tables[a]) != 0)
			return -1;
		e->dc_used[d] = e->ac_used[a] = 1;
		e->block_dc[b] = &e->dc_tables[d];
		e->block_ac[b] = &e->ac_tables[a];
		e->block_component[b] = ci;
		e->dc_needed[b] = comp->component_needed ? 1 : 0;
		e->ac_needed[b] = comp->component_needed && comp->DCT_scaled_size > 1;
	}
	e->blocks = c->blocks_in_MCU;
	e->end = c->src->next_input_byte + c->src->bytes_in_buffer;
	e->restart_interval = c->restart_interval;
	e->next_restart = 0;
	snap_entropy_reset(e, c->src->next_input_byte);
	return 0;
}

static inline uint64_t
snap_load_be64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}

/* Tops the buffer up to at least 57 bits, byte by byte, as libjpeg's
 * jpeg_fill_bit_buffer reads: 0xFF 0x00 is a 0xFF byte (fill 0xFF bytes before
 * it are skipped), 0xFF then anything else is a marker, after which only zero
 * padding follows (counted in `pad`). The end of the buffer counts as a marker
 * that is no restart marker. */
static void
snap_entropy_fill_slow(struct snap_entropy *e)
{
	while (e->bits <= 56) {
		if (e->marker) {
			e->pad += 64 - e->bits;
			e->bits = 64;
			return;
		}
		const uint8_t *p = e->next;
		if (p >= e->end) {
			e->marker = -1;
			e->marker_at = p;
			continue;
		}
		unsigned int byte = *p++;
		if (byte == 0xFF) {
			while (p < e->end && *p == 0xFF)
				p++;
			if (p >= e->end) {
				e->marker = -1;
				e->marker_at = e->next;
				continue;
			}
			if (*p != 0) {
				e->marker = *p;
				e->marker_at = e->next;
				continue;
			}
			p++;
		}
		e->next = p;
		e->acc |= (uint64_t) byte << (56 - e->bits);
		e->bits += 8;
	}
}

/* A restart marker where libjpeg expects one, right after the data (less than a
 * byte of padding), with the next number: anything else is deferred. */
static int
snap_entropy_restart(struct snap_entropy *e)
{
	if (!e->marker)
		snap_entropy_fill_slow(e);
	if (e->marker != 0xD0 + e->next_restart || e->bits - e->pad >= 8)
		return SNAP_ENTROPY_DEFER;
	const uint8_t *p = e->marker_at;
	while (*p == 0xFF)
		p++;
	e->next_restart = (e->next_restart + 1) & 7;
	snap_entropy_reset(e, p + 1);
	return SNAP_ENTROPY_OK;
}

/* The bit buffer in locals while an MCU is decoded (the fills and the look-ups
 * then stay in registers); written back to `e` around the rare calls. */
#define LOAD() (acc = e->acc, bits = e->bits)
#define SAVE() (e->acc = acc, e->bits = bits)
#define FILL() do { \
	if (__builtin_expect(next <= safe, 1)) { \
		acc |= snap_load_be64(next) >> bits; \
		next += (63 - bits) >> 3; \
		bits |= 56; \
	} else if (bits < 32) { \
		e->next = next; SAVE(); snap_entropy_fill_slow(e); LOAD(); next = e->next; \
		safe = snap_entropy_safe(e); \
	} \
} while (0)
#define DROP(n) (acc <<= (n), bits -= (int) (n))

/* One symbol read bit by bit from code length `first` on (libjpeg's
 * jpeg_huff_decode; a prefix code decodes one way, so a length known to be too
 * short may be skipped): the symbol, or -1 for a bit pattern that is no code.
 * Needs 16 bits in the buffer. */
static inline int
snap_code(uint64_t *acc, int *bits, const struct snap_huff *t, int first)
{
	for (int l = first; l <= 16; l++) {
		int code = (int) (*acc >> (64 - l));
		if (code <= t->maxcode[l]) {
			*acc <<= l;
			*bits -= l;
			return t->huffval[(code + t->valoffset[l]) & 0xFF];
		}
	}
	return -1;
}

int
snap_entropy_decode_mcu(struct snap_entropy *e, JBLOCKROW *blocks)
{
	if (e->restart_interval) {
		if (e->restarts_to_go == 0 && snap_entropy_restart(e) != SNAP_ENTROPY_OK)
			return SNAP_ENTROPY_DEFER;
	}
	JCOEF scratch[DCTSIZE2];
	uint64_t acc;
	int bits;
	const uint8_t *next = e->next;
	const uint8_t *safe = e->safe;
	LOAD();
	for (int b = 0; b < e->blocks; b++) {
		JCOEF *block = blocks ? blocks[b][0] : NULL;
		const struct snap_dc_table *dc = e->block_dc[b];
		const struct snap_ac_table *ac = e->block_ac[b];
		FILL();
		int diff;
		uint32_t d = dc->look[acc >> (64 - DC_BITS)];
		if (__builtin_expect((d & KIND_MASK) == 0, 1)) {
			DROP(d & 31);
			diff = (int16_t) (d >> 16);
		} else {
			int s;
			if (d & 31) {
				DROP(d & 31);
				s = (int) ((d >> 8) & 15);
			} else if ((s = snap_code(&acc, &bits, &dc->code, DC_BITS + 1)) < 0)
				return SNAP_ENTROPY_DEFER;
			diff = 0;
			if (s) {
				diff = snap_extend((unsigned int) (acc >> (64 - s)), s);
				DROP(s);
			}
		}
		if (e->dc_needed[b]) {
			int ci = e->block_component[b];
			/* libjpeg adds in int; wrapping here is what its builds do. */
			int dcv = (int) ((unsigned int) diff + (unsigned int) e->last_dc[ci]);
			e->last_dc[ci] = dcv;
			if (block)
				block[0] = (JCOEF) dcv;
		}
		JCOEF *out = block && e->ac_needed[b] ? block : scratch;
		const uint32_t *table = ac->look;
		/* k: the position (zig-zag order) of the last coefficient; libjpeg's
		 * loop ends when it reaches 63. */
		int k = 0;
		for (;;) {
			FILL();
			uint32_t a = table[acc >> (64 - AC_BITS)];
			int span = (int) ((a >> 4) & 63);
			if (__builtin_expect(k + span < 63, 1)) {
				DROP(a & 15);
				int advance = (int) ((a >> 10) & 31);
				JCOEF *to = advance ? out : scratch;
				int k1 = k + advance;
				k += span;
				to[jpeg_natural_order[k1]] = (JCOEF) (int8_t) (a >> 16);
				to[jpeg_natural_order[k]] = (JCOEF) (int8_t) (a >> 24);
				if (a & AC_END)
					break;
				continue;
			}
			/* One symbol at a time, as libjpeg reads it: a long code, a ZRL, a
			 * magnitude past the look-up, or a run near the end of the block. */
			int sym;
			if (!(a & 15)) {
				if ((sym = snap_code(&acc, &bits, &ac->code, AC_BITS + 1)) < 0)
					return SNAP_ENTROPY_DEFER;
			} else if (span == 63) {
				DROP(a & 15);
				sym = (int) ((a >> 16) & 0xFF);
			} else if ((sym = snap_code(&acc, &bits, &ac->code, 1)) < 0) {
				/* A run entry near the end of the block: its first symbol alone
				 * (it is a code, so this does not fail). */
				return SNAP_ENTROPY_DEFER;
			}
			int r = sym >> 4, s = sym & 15;
			if (s) {
				k += r + 1;
				out[jpeg_natural_order[k]] = (JCOEF) snap_extend((unsigned int) (acc >> (64 - s)), s);
				DROP(s);
				if (k >= 63)
					break;
			} else {
				if (r != 15)
					break;
				k += 16;
				if (k >= 63)
					break;
			}
		}
	}
	e->next = next;
	e->safe = safe;
	SAVE();
	/* Bits taken from the padding after a marker: libjpeg warns and fills zeros.
	 * The end of the buffer without a marker: libjpeg's read-ahead warns. */
	if (e->bits < e->pad || e->marker < 0)
		return SNAP_ENTROPY_DEFER;
	if (e->restart_interval)
		e->restarts_to_go--;
	return SNAP_ENTROPY_OK;
}

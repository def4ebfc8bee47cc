/* libexif: the EXIF orientation tag. */
#define _GNU_SOURCE 1
#include "vipsshim.h"

#include <libexif/exif-data.h>

int
snap_exif_orientation(const void *exif, size_t len)
{
	if (!exif || len < 6)
		return 0;
	ExifData *data = exif_data_new();
	if (!data)
		return 0;
	exif_data_unset_option(data, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
	exif_data_load_data(data, exif, (unsigned int) len);
	int orientation = 0;
	ExifEntry *entry = exif_content_get_entry(data->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
	if (entry && entry->format == EXIF_FORMAT_SHORT && entry->components >= 1 && entry->data &&
		entry->size >= 2)
		orientation = exif_get_short(entry->data, exif_data_get_byte_order(data));
	exif_data_unref(data);
	return orientation;
}

/* libexif has no version call: Package.swift reads the version from libexif.pc at build time. */
#ifndef SNAP_LIBEXIF_VERSION
#define SNAP_LIBEXIF_VERSION "unknown"
#endif
const char *snap_exif_version(void) { return SNAP_LIBEXIF_VERSION; }

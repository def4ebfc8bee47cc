/* Which libjpeg-turbo is loaded, and whether SnapThumb's code that reads its private
 * structs (jpeg_entropy.c, jpeg_idct.c) may run on it. Those structs are not an API:
 * libjpeg-turbo 3.x reworked them, and a layout check alone could pass with other
 * meanings. So that code runs only on a version it was tested against, and only when
 * the loaded library is the one SnapThumb was built against; otherwise libjpeg's own
 * decoding runs (the same pixels, a little more CPU), and `snapthumb version` says so. */
#define _GNU_SOURCE 1
#include "jpegshim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jpeglib.h>

#define SNAP_STRINGIFY_(x) #x
#define SNAP_STRINGIFY(x) SNAP_STRINGIFY_(x)

/* The versions the private-struct code was tested against (its tests and the
 * differential fuzz target, Scripts/fuzz-decoder.sh, ran on each). */
static const char *const snap_tested_versions[] = { "2.1.5" };

static char snap_runtime[32];
static int snap_ok;
static pthread_once_t snap_once = PTHREAD_ONCE_INIT;

/* The loaded library's own "libjpeg-turbo version X.Y.Z" string (libjpeg-turbo builds
 * it into the library; there is no call that returns it), read from its file. */
static void
snap_read_runtime_version(void)
{
	Dl_info info;
	if (!dladdr((void *) jpeg_CreateDecompress, &info) || !info.dli_fname)
		return;
	int fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (64 << 20)) {
		void *map = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map != MAP_FAILED) {
			static const char marker[] = "libjpeg-turbo version ";
			const char *found = memmem(map, (size_t) st.st_size, marker, sizeof(marker) - 1);
			if (found) {
				const char *v = found + sizeof(marker) - 1, *end = (const char *) map + st.st_size;
				size_t n = 0;
				while (v + n < end && n < sizeof(snap_runtime) - 1 && (v[n] == '.' || (v[n] >= '0' && v[n] <= '9')))
					n++;
				memcpy(snap_runtime, v, n);
				snap_runtime[n] = 0;
			}
			munmap(map, (size_t) st.st_size);
		}
	}
	close(fd);
}

static void
snap_decide(void)
{
	snap_read_runtime_version();
#ifdef LIBJPEG_TURBO_VERSION
	const char *built = SNAP_STRINGIFY(LIBJPEG_TURBO_VERSION);
	if (strcmp(snap_runtime, built) != 0)
		return;
	for (size_t i = 0; i < sizeof(snap_tested_versions) / sizeof(snap_tested_versions[0]); i++)
		if (strcmp(snap_runtime, snap_tested_versions[i]) == 0)
			snap_ok = 1;
#endif
}

const char *
snap_jpeg_runtime_version(void)
{
	pthread_once(&snap_once, snap_decide);
	return snap_runtime;
}

int
snap_jpeg_internals_ok(void)
{
	pthread_once(&snap_once, snap_decide);
	return snap_ok;
}

/* The face plugin's loader: see snap_face_loader.h. */
#define _GNU_SOURCE
#include "snap_face_loader.h"
#include "snap_face.h" /* CFaceShim's API, for the compile-time checks below only (nothing links it) */

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The table must match the plugin's API exactly. */
_Static_assert(sizeof(snap_face_plugin_box) == sizeof(snap_face_box), "snap_face_box changed");
_Static_assert(offsetof(snap_face_plugin_box, x) == offsetof(snap_face_box, x), "snap_face_box changed");
_Static_assert(offsetof(snap_face_plugin_box, y) == offsetof(snap_face_box, y), "snap_face_box changed");
_Static_assert(offsetof(snap_face_plugin_box, width) == offsetof(snap_face_box, width), "snap_face_box changed");
_Static_assert(offsetof(snap_face_plugin_box, height) == offsetof(snap_face_box, height), "snap_face_box changed");
_Static_assert(offsetof(snap_face_plugin_box, score) == offsetof(snap_face_box, score), "snap_face_box changed");
_Static_assert(__builtin_types_compatible_p(__typeof__(&snap_faces_detect),
                                            int (*)(const unsigned char *, int, int, int, float, snap_face_box *, int, char *, int)),
               "snap_faces_detect changed");
_Static_assert(__builtin_types_compatible_p(__typeof__(&snap_faces_prepare), __typeof__(((snap_face_plugin *)0)->prepare)),
               "snap_faces_prepare changed");
_Static_assert(__builtin_types_compatible_p(__typeof__(&snap_faces_opencv_version), __typeof__(((snap_face_plugin *)0)->opencv_version)),
               "snap_faces_opencv_version changed");

#define CANDIDATES 2

/* The candidate paths, in order; 0, or -1 when the executable's path is unknown. */
static int candidates(char paths[CANDIDATES][PATH_MAX]) {
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0) return -1;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash) return -1;
	*slash = 0;
	const char *dir = exe[0] ? exe : "/";
	if (snprintf(paths[0], PATH_MAX, "%s/%s", dir, SNAP_FACE_PLUGIN_NAME) >= PATH_MAX) return -1;
	if (snprintf(paths[1], PATH_MAX, "%s/../lib/snapthumb/%s", dir, SNAP_FACE_PLUGIN_NAME) >= PATH_MAX) return -1;
	return 0;
}

static void copy_message(char *out, int size, const char *text) {
	if (!out || size <= 0) return;
	snprintf(out, (size_t)size, "%s", text);
}

int snap_face_plugin_find(char *path, int path_size) {
	char paths[CANDIDATES][PATH_MAX];
	if (candidates(paths) != 0) {
		copy_message(path, path_size, "the face plugin " SNAP_FACE_PLUGIN_NAME " was not looked for: the executable's path is unknown (/proc/self/exe)");
		return 0;
	}
	for (int i = 0; i < CANDIDATES; i++) {
		if (access(paths[i], R_OK) == 0) {
			char real[PATH_MAX];
			copy_message(path, path_size, realpath(paths[i], real) ? real : paths[i]);
			return 1;
		}
	}
	char message[2 * PATH_MAX + 128];
	snprintf(message, sizeof message, "the face plugin " SNAP_FACE_PLUGIN_NAME " is missing (looked for %s and %s)", paths[0], paths[1]);
	copy_message(path, path_size, message);
	return 0;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static snap_face_plugin table;
static int opened; /* 1: table is good; 0: message says why not */
static char message[2 * PATH_MAX + 512];

static void open_plugin(void) {
	char path[2 * PATH_MAX + 128];
	if (!snap_face_plugin_find(path, sizeof path)) {
		snprintf(message, sizeof message, "%s", path);
		return;
	}
	/* Lazy, as the linked binary bound OpenCV before: RTLD_NOW binds every symbol of OpenCV's
	 * tree at once, about 2 ms more per process that detects faces. A missing library (a
	 * NEEDED soname) still fails here, with the linker's message. */
	void *handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!handle) {
		const char *why = dlerror();
		snprintf(message, sizeof message, "the face plugin %s does not load: %s", path, why ? why : "unknown dlopen error");
		return;
	}
	void *detect = dlsym(handle, "snap_faces_detect");
	void *prepare = dlsym(handle, "snap_faces_prepare");
	void *version = dlsym(handle, "snap_faces_opencv_version");
	if (!detect || !prepare || !version) {
		snprintf(message, sizeof message, "the face plugin %s lacks %s: another build's?", path,
		         !detect ? "snap_faces_detect" : !prepare ? "snap_faces_prepare" : "snap_faces_opencv_version");
		dlclose(handle);
		return;
	}
	/* Kept open for the life of the process. */
	table.detect = (int (*)(const unsigned char *, int, int, int, float, snap_face_plugin_box *, int, char *, int))detect;
	table.prepare = (int (*)(char *, int))prepare;
	table.opencv_version = (const char *(*)(void))version;
	__atomic_store_n(&opened, 1, __ATOMIC_RELEASE);
}

const snap_face_plugin *snap_face_plugin_load(char *error, int error_size) {
	pthread_once(&once, open_plugin);
	if (opened) return &table;
	copy_message(error, error_size, message);
	return NULL;
}

int snap_face_plugin_loaded(void) {
	/* pthread_once has run to completion when opened is set by it; a racing reader sees 0 at worst. */
	return __atomic_load_n(&opened, __ATOMIC_ACQUIRE);
}

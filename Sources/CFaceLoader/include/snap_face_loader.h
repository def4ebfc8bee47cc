/* CFaceLoader: opens the face plugin (libSnapThumbFaces.so: CFaceShim and OpenCV) with dlopen on
 * first use, so that a process that detects no faces never loads OpenCV (about 7.5 ms of every
 * start, its library tree and static constructors). FaceKit calls the detector through the table
 * of plain C function pointers this returns; the plugin's API is CFaceShim's snap_face.h. */
#ifndef SNAP_FACE_LOADER_H
#define SNAP_FACE_LOADER_H

#ifdef __cplusplus
extern "C" {
#endif

/* The plugin's file name, looked for beside the running executable (/proc/self/exe), then in
 * ../lib/snapthumb/ from the executable's directory (an install: <prefix>/bin/snapthumb and
 * <prefix>/lib/snapthumb/libSnapThumbFaces.so). */
#define SNAP_FACE_PLUGIN_NAME "libSnapThumbFaces.so"

/* snap_face_box of snap_face.h, the same layout (face_loader.c checks it at compile time). */
typedef struct snap_face_plugin_box {
	float x, y, width, height;
	float score;
} snap_face_plugin_box;

/* CFaceShim's C API, as loaded (snap_face.h says what each does). */
typedef struct snap_face_plugin {
	int (*detect)(const unsigned char *rgb, int width, int height, int input_short, float min_score,
	              snap_face_plugin_box *out, int max_faces, char *error, int error_size);
	int (*prepare)(char *error, int error_size);
	const char *(*opencv_version)(void);
} snap_face_plugin;

/* Where the plugin is (the first candidate that exists), without loading it: 1 with the path
 * in path (NUL-terminated), or 0 with every place looked at in path (as a message). */
int snap_face_plugin_find(char *path, int path_size);

/* The plugin, opened on the first call (once per process, thread-safe; later calls return the
 * same table, or the same failure). NULL when it is missing or does not load, with a message in
 * error (NUL-terminated). */
const snap_face_plugin *snap_face_plugin_load(char *error, int error_size);

/* 1 when the plugin has been opened in this process (for tests and `version`). */
int snap_face_plugin_loaded(void);

#ifdef __cplusplus
}
#endif

#endif

// YuNet (second generation) over OpenCV's dnn module, with the output decoding done here:
// OpenCV 4.6's cv::FaceDetectorYN reads only the first generation's outputs.
#include "snap_face.h"

#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/dnn.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// The model's bytes, built into the binary: nothing is read from disk at run time.
// SNAP_FACE_MODEL is the .onnx file's path (Package.swift); model/README.md says where
// it comes from.
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".hidden snap_face_model_bytes\n"
        ".hidden snap_face_model_end\n"
        "snap_face_model_bytes:\n"
        ".incbin \"" SNAP_FACE_MODEL "\"\n"
        "snap_face_model_end:\n"
        ".popsection\n");
extern "C" const char snap_face_model_bytes[];
extern "C" const char snap_face_model_end[];

namespace {

void set_error(char *error, int size, const std::string &text) {
	if (!error || size <= 0) return;
	std::snprintf(error, (size_t) size, "%s", text.c_str());
}

// One network per thread: cv::dnn::Net is not safe to run from two threads at once, and
// workers on threads (--isolation threads) each detect. OpenCV's own thread pool is
// turned off once: a snap's detection is far too small to split, and one thread keeps
// the arithmetic in one order (the same boxes every time).
thread_local std::unique_ptr<cv::dnn::Net> network;
std::once_flag single_thread;

int load(char *error, int size) {
	if (network) return 0;
	std::call_once(single_thread, [] { cv::setNumThreads(1); });
	try {
		auto net = std::make_unique<cv::dnn::Net>(
		    cv::dnn::readNetFromONNX(snap_face_model_bytes, (size_t) (snap_face_model_end - snap_face_model_bytes)));
		net->setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
		net->setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
		network = std::move(net);
		return 0;
	} catch (const std::exception &e) {
		set_error(error, size, std::string("the face model did not load: ") + e.what());
		return -1;
	}
}

struct Candidate {
	float x, y, w, h, score;
	int order;
};

float overlap(const Candidate &a, const Candidate &b) {
	float x0 = std::max(a.x, b.x), y0 = std::max(a.y, b.y);
	float x1 = std::min(a.x + a.w, b.x + b.w), y1 = std::min(a.y + a.h, b.y + b.h);
	float inter = std::max(0.f, x1 - x0) * std::max(0.f, y1 - y0);
	float uni = a.w * a.h + b.w * b.h - inter;
	return uni > 0 ? inter / uni : 0;
}

} // namespace

extern "C" int snap_faces_prepare(char *error, int error_size) { return load(error, error_size); }

extern "C" const char *snap_faces_opencv_version(void) { return CV_VERSION; }

extern "C" int snap_faces_detect(const unsigned char *rgb, int width, int height, int input_short, float min_score,
                                 snap_face_box *out, int max_faces, char *error, int error_size) {
	if (!rgb || width < 1 || height < 1 || input_short < 32 || max_faces < 0 || (max_faces > 0 && !out)) {
		set_error(error, error_size, "bad arguments to the face detector");
		return -2;
	}
	if (load(error, error_size)) return -1;
	try {
		// The scaled copy: short side at most input_short, long side at most twice that.
		double scale = std::min({1.0, (double) input_short / std::min(width, height),
		                         2.0 * input_short / std::max(width, height)});
		int w = std::max(1, (int) std::lround(width * scale)), h = std::max(1, (int) std::lround(height * scale));
		cv::Mat source(height, width, CV_8UC3, (void *) rgb);
		cv::Mat small;
		if (w == width && h == height) small = source;
		else cv::resize(source, small, cv::Size(w, h), 0, 0, cv::INTER_AREA);
		// The network's strides go to 32: pad right and bottom with black.
		int pw = (w + 31) / 32 * 32, ph = (h + 31) / 32 * 32;
		cv::Mat padded;
		cv::copyMakeBorder(small, padded, 0, ph - h, 0, pw - w, cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
		// YuNet was trained on BGR pixel values 0…255.
		cv::Mat blob = cv::dnn::blobFromImage(padded, 1.0, cv::Size(), cv::Scalar(), true, false, CV_32F);
		network->setInput(blob);
		static const std::vector<cv::String> names = {"cls_8", "cls_16", "cls_32", "obj_8", "obj_16", "obj_32",
		                                              "bbox_8", "bbox_16", "bbox_32"};
		std::vector<cv::Mat> outs;
		network->forward(outs, names);

		std::vector<Candidate> found;
		const int strides[3] = {8, 16, 32};
		for (int k = 0; k < 3; k++) {
			int s = strides[k], cols = pw / s, rows = ph / s;
			size_t n = (size_t) cols * rows;
			const cv::Mat &cls = outs[k], &obj = outs[3 + k], &box = outs[6 + k];
			if (cls.total() != n || obj.total() != n || box.total() != 4 * n) {
				set_error(error, error_size, "the face model's outputs have unexpected sizes");
				return -3;
			}
			const float *c = cls.ptr<float>(), *o = obj.ptr<float>(), *b = box.ptr<float>();
			for (int r = 0; r < rows; r++) {
				for (int col = 0; col < cols; col++) {
					size_t i = (size_t) r * cols + col;
					float score = std::sqrt(std::clamp(c[i], 0.f, 1.f) * std::clamp(o[i], 0.f, 1.f));
					if (!(score >= min_score)) continue;
					// Centre offsets in cells, sizes as log multiples of the stride.
					float cx = (col + b[4 * i]) * s, cy = (r + b[4 * i + 1]) * s;
					float bw = std::exp(b[4 * i + 2]) * s, bh = std::exp(b[4 * i + 3]) * s;
					if (!std::isfinite(cx) || !std::isfinite(cy) || !std::isfinite(bw) || !std::isfinite(bh)) continue;
					found.push_back({cx - bw / 2, cy - bh / 2, bw, bh, score, (int) found.size()});
				}
			}
		}
		std::sort(found.begin(), found.end(), [](const Candidate &a, const Candidate &b) {
			return a.score != b.score ? a.score > b.score : a.order < b.order;
		});
		std::vector<Candidate> kept;
		for (const Candidate &candidate : found) {
			bool merged = false;
			for (const Candidate &k : kept)
				if (overlap(candidate, k) > 0.3f) { merged = true; break; }
			if (!merged) kept.push_back(candidate);
			if ((int) kept.size() == max_faces) break;
		}
		// Back to the caller's pixels, clipped to the image.
		for (size_t i = 0; i < kept.size(); i++) {
			const Candidate &k = kept[i];
			float x0 = std::clamp(k.x / (float) scale, 0.f, (float) width), y0 = std::clamp(k.y / (float) scale, 0.f, (float) height);
			float x1 = std::clamp((k.x + k.w) / (float) scale, 0.f, (float) width);
			float y1 = std::clamp((k.y + k.h) / (float) scale, 0.f, (float) height);
			out[i] = {x0, y0, x1 - x0, y1 - y0, k.score};
		}
		return (int) kept.size();
	} catch (const std::exception &e) {
		set_error(error, error_size, std::string("the face detector failed: ") + e.what());
		return -3;
	}
}

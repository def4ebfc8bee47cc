#!/usr/bin/env bash
# Installs the Debian packages SnapThumb needs, only when they are missing.
# Safe to run again and again; used by run-samples.sh and test.sh.
set -euo pipefail

packages=()
pkg-config --exists vips 2>/dev/null || packages+=(libvips-dev)
pkg-config --exists libexif 2>/dev/null || packages+=(libexif-dev)
command -v pkg-config >/dev/null 2>&1 || packages+=(pkg-config)
# vipsthumbnail: the benchmark's reference side.
command -v vipsthumbnail >/dev/null 2>&1 || packages+=(libvips-tools)
[ -e /usr/include/libimagequant.h ] || packages+=(libimagequant-dev)
# OpenSSL: SHA-256 with the CPU's SHA extensions (snap_sha256).
[ -e /usr/include/openssl/evp.h ] || packages+=(libssl-dev)
# libcurl: HTTPKit's one HTTP client (buckets, queues, Google).
[ -e /usr/include/curl/curl.h ] || [ -e /usr/include/x86_64-linux-gnu/curl/curl.h ] || [ -e /usr/include/aarch64-linux-gnu/curl/curl.h ] || packages+=(libcurl4-openssl-dev)
# OpenCV's dnn (YuNet face detector, CFaceShim): only the three libraries it links, not all of OpenCV.
[ -e /usr/include/opencv4/opencv2/dnn.hpp ] || packages+=(libopencv-dnn-dev)
[ -e /usr/include/opencv4/opencv2/imgproc.hpp ] || packages+=(libopencv-imgproc-dev)
# The openssl command: the Google tests make a throwaway RSA key and check RS256 signatures with it.
command -v openssl >/dev/null 2>&1 || packages+=(openssl)
# promtool (Debian ships it in prometheus): the tests check the watch metrics file with it.
command -v promtool >/dev/null 2>&1 || packages+=(prometheus)
# systemd-analyze: the tests rate the shipped systemd unit with `systemd-analyze security --offline=true`.
command -v systemd-analyze >/dev/null 2>&1 || packages+=(systemd)

if [ ${#packages[@]} -gt 0 ]; then
  echo "setup: installing ${packages[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

command -v swift >/dev/null 2>&1 || { echo "setup: swift is not on PATH (Swift 6 toolchain needed)" >&2; exit 1; }

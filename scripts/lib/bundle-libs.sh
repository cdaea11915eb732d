# Sourced by scripts/gpu-test, scripts/device-bundle and scripts/device-e2e: which shared
# libraries travel with our binaries to a GPU machine, and where that machine's CUDA libraries
# are. One place, so the GPU test bundle and the device bundle cannot drift apart.

# True for a library a bundle must NOT carry: glibc and the dynamic loader, libgcc_s and
# libstdc++ (the GPU machine's are newer, and its CUDA libraries need those), and CUDA's own
# libraries (the machine has them, matching its driver, and they are hundreds of MiB).
bundle_is_system_lib() {
  case "$(basename "$1")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libutil.so*|libresolv.so*|\
    libnsl.so*|libanl.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|\
    libcuda.so*|libcudart.so*|libcupti.so*|libcublas*|libnvrtc*|libnvJitLink*|libcudnn*|\
    libnvperf*|libnvidia-*) return 0 ;;
  esac
  return 1
}

# bundle_copy_libs DEST FILE...: copies into DEST every shared library that `ldd` resolves for
# the FILEs (executables or libraries), except the ones above. Fails on a library ldd cannot
# find: a bundle with a hole in it would fail only on the machine that lacks it.
bundle_copy_libs() {
  local dest=$1 lib missing
  shift
  mkdir -p "$dest"
  missing=$(for f in "$@"; do ldd "$f"; done | awk '/=> not found/{print $1}' | sort -u)
  if [[ -n "$missing" ]]; then
    echo "bundle_copy_libs: ldd finds no $missing" >&2
    return 1
  fi
  for f in "$@"; do
    ldd "$f" | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    bundle_is_system_lib "$lib" || cp -L "$lib" "$dest/"
  done
}

# The GPU machine's CUDA library folders (libcublasLt, libcupti, libnvrtc, libnvJitLink,
# libcudnn), colon-separated, for LD_LIBRARY_PATH. The CUDA 13 image keeps them in
# /usr/local/cuda/lib64 (cuDNN too, as the first device calls showed); the torch venv's wheels
# are the fallback for cuDNN.
device_cuda_library_path() {
  local cuda=${CUDA_HOME:-/usr/local/cuda} dirs=() d
  for d in "$cuda/lib64" "$cuda/extras/CUPTI/lib64"; do
    [[ -d "$d" ]] && dirs+=("$d")
  done
  if ! ls "$cuda"/lib64/libcudnn.so.* >/dev/null 2>&1 &&
     ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.'; then
    for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib; do
      [[ -d "$d" ]] && dirs+=("$d")
    done
  fi
  local IFS=:
  echo "${dirs[*]}"
}

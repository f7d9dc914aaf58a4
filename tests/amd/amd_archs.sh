# tests/amd/amd_archs.sh: sourced by check.sh and check_mfma.sh. Sets
# $archs, the AMD archs to compile for: gfx942 and gfx90a, and gfx950 (OCP
# e4m3, fp8 MFMA, 160 KB of LDS) where the compiler $cxx knows it (clang-19
# does not; the arch layer is ready for it); prints a SKIP line named
# ${amd_name}_gfx950 otherwise (amd_name: set by the caller).
archs="gfx942 gfx90a"
if echo 'int fmha_gfx950_probe;' | "$cxx" -x hip -nogpulib -nogpuinc --cuda-device-only --offload-arch=gfx950 \
        -fsyntax-only - > /dev/null 2>&1; then
    archs="$archs gfx950"
else
    echo "SKIP ${amd_name}_gfx950: $cxx does not know gfx950"
fi

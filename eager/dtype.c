/* eager/dtype.c — what each dtype is: its size, its name, whether kernels exist for it. A leaf
 * of the core, so that kernels and the tensor code can both ask without depending on each
 * other. */
#include "internal.h"

size_t dg_dtype_size(dg_dtype dt) {
    switch (dt) {
    case DG_F32: case DG_I32: return 4;
    case DG_F64: case DG_I64: return 8;
    case DG_F16: case DG_BF16: return 2;
    case DG_BOOL: return 1;
    }
    return 0;
}
const char *dg_dtype_name(dg_dtype dt) {
    static const char *names[] = {"float32", "float64", "int64", "int32", "float16", "bfloat16", "bool"};
    return (unsigned)dt < sizeof names / sizeof *names ? names[dt] : "invalid";
}
bool dg_dtype_is_float(dg_dtype dt) { return dt == DG_F32 || dt == DG_F64 || dt == DG_F16 || dt == DG_BF16; }

/* dygraph/io.h — named tensors to and from safetensors files (8-byte little-endian header
 * length, JSON header, raw little-endian data), the format PyTorch and Paddle users read with
 * `safetensors`. Writes go to a temporary file that is fsync'd and renamed, so a crash never
 * damages an existing file. Reads validate the whole file before making any tensor: a bad file
 * is an error naming the file and the byte offset, never a crash or a partial load. */
#ifndef DYGRAPH_IO_H
#define DYGRAPH_IO_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_tensor_dict dg_tensor_dict;   /* ordered name -> tensor map; owns its tensors */

DG_API dg_tensor_dict *dg_tensor_dict_new(void);
DG_API void dg_tensor_dict_free(dg_tensor_dict *d);
/* Adds a reference to t under name (copied); a name may appear once. */
DG_API int dg_tensor_dict_set(dg_tensor_dict *d, const char *name, dg_tensor *t);
DG_API dg_tensor *dg_tensor_dict_get(const dg_tensor_dict *d, const char *name);   /* borrowed, NULL if absent */
DG_API int dg_tensor_dict_size(const dg_tensor_dict *d);
DG_API const char *dg_tensor_dict_name(const dg_tensor_dict *d, int i);
DG_API dg_tensor *dg_tensor_dict_tensor(const dg_tensor_dict *d, int i);            /* borrowed */

/* Save every tensor of d (any device; copied to host) as a safetensors file. */
DG_API int dg_save_safetensors(const char *path, const dg_tensor_dict *d);
/* Load a whole file into a new dict of CPU tensors; NULL and a message on any defect. */
DG_API dg_tensor_dict *dg_load_safetensors(const char *path);
/* The same from a memory buffer (name is used in messages). */
DG_API dg_tensor_dict *dg_load_safetensors_buffer(const void *buf, size_t len, const char *name);

#ifdef __cplusplus
}
#endif
#endif

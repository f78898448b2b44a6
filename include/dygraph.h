/* dygraph.h — umbrella header: an embeddable dynamic-graph (eager) training engine in C. */
#ifndef DYGRAPH_H
#define DYGRAPH_H

#include "dygraph/core.h"
#include "dygraph/tensor.h"
#include "dygraph/autograd.h"
#include "dygraph/ops.h"
#include "dygraph/custom_op.h"
#include "dygraph/nn.h"
#include "dygraph/optim.h"
#include "dygraph/autocast.h"
#include "dygraph/amp.h"
#include "dygraph/io.h"
#include "dygraph/models.h"
#include "dygraph/onnx.h"
#include "dygraph/checkpoint.h"
#include "dygraph/data.h"
#include "dygraph/dist.h"
#include "dygraph/profiler.h"
#include "dygraph/rnn.h"

#endif

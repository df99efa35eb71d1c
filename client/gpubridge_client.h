/* gpubridge_client.h: the client's header before it moved to
 * <gpubridge/client.h> (the demo grains' helpers to <gpubridge/demo.h>);
 * kept so that code including it still builds. */
#ifndef GPUBRIDGE_CLIENT_H
#define GPUBRIDGE_CLIENT_H

#include "gpubridge/client.h"
#include "gpubridge/demo.h"

#endif

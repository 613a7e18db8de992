// The C API's store handle (resurgo.h's opaque rsg_store), shared by the C
// APIs of the layers above the Store (auto/c_api.cpp).
#pragma once

#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"

struct rsg_store {
  resurgo::Store store;
};

// The C API of MPI stores (resurgo/resurgo_mpi.h): the C shell over
// Store(name, config, mpi_comm(comm)).
#include "base/c_status.h"
#include "base/c_store.h"
#include "resurgo/mpi.hpp"
#include "resurgo/resurgo_mpi.h"

using resurgo::c_api::guarded;
using resurgo::c_api::invalid;

extern "C" {

int rsg_open_mpi(const char* config_path, const char* name, MPI_Comm comm, rsg_store** out) {
  if (name == nullptr || out == nullptr) return invalid("rsg_open_mpi: name and out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    const resurgo::Config config = resurgo::Config::load(config_path == nullptr ? "" : config_path);
    *out = new rsg_store{resurgo::Store(name, config, resurgo::mpi_comm(comm))};
  });
}

int rsg_open_mpi_fortran(const char* config_path, const char* name, MPI_Fint comm, rsg_store** out) {
  return rsg_open_mpi(config_path, name, MPI_Comm_f2c(comm), out);
}

int rsg_protect_global(rsg_store* s, int id, void* ptr, size_t bytes, const char* label, const char* dtype,
                       int ndims, const int64_t* global_shape, const int64_t* offset, const int64_t* shape) {
  if (s == nullptr || dtype == nullptr) return invalid("rsg_protect_global: store and dtype must not be NULL");
  if (const int refused = resurgo::c_api::refuse_unusable(s, "rsg_protect_global")) return refused;
  if (ndims <= 0 || global_shape == nullptr || offset == nullptr || shape == nullptr) {
    return invalid("rsg_protect_global: ndims must be positive and global_shape, offset and shape not NULL");
  }
  const auto axes = static_cast<std::size_t>(ndims);
  return guarded([&] {
    s->store.protect(id, ptr, bytes, label == nullptr ? "" : label,
                     resurgo::ElementType{dtype, {shape, shape + axes}},
                     resurgo::GlobalBlock{{global_shape, global_shape + axes}, {offset, offset + axes}});
  });
}

}  // extern "C"

// ConvergentMatrix's global-layout files (global_file.h; docs/matrix.md,
// "Global-layout files"). Each rank's blocks are an MPI darray of the global
// array, so one collective MPI-IO call writes or reads them at their places
// in the file, whatever the grid; the part checksums are summed over the
// ranks (part_checksums.h). Rank 0 alone creates, renames and reads the
// header through the Env. Every step that may fail on some ranks only ends
// in an agreement: all ranks throw the same error, none waits in a
// collective call the others left.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/random.h"
#include "matrix/global_file.h"
#include "matrix/matrix_impl.h"
#include "matrix/mpi_call.h"
#include "matrix/part_checksums.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// Runs `step`, then throws on every rank the error (type and message) of
// the lowest rank where it threw; returns on every rank when it threw
// nowhere.
void agree_on(const MatrixContext& context, const std::function<void()>& step) {
  int code = 0;
  std::string message;
  try {
    step();
  } catch (const Error& error) {
    code = static_cast<int>(error.code());
    message = error.what();
  } catch (const std::exception& error) {
    code = static_cast<int>(ErrorCode::kState);
    message = error.what();
  }
  const int mine = code == 0 ? context.size : context.rank;
  int first = context.size;
  check_mpi(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, context.comm), "MPI_Allreduce");
  if (first == context.size) return;
  int sent[2] = {code, static_cast<int>(message.size())};
  check_mpi(MPI_Bcast(sent, 2, MPI_INT, first, context.comm), "MPI_Bcast");
  message.resize(static_cast<std::size_t>(sent[1]));
  check_mpi(MPI_Bcast(message.data(), sent[1], MPI_CHAR, first, context.comm), "MPI_Bcast");
  rethrow_as_is(Error(static_cast<ErrorCode>(sent[0]), message));
}

// Runs `step` on rank 0 only, in an agreement; an error of the Env gets
// `where` in front.
void on_rank_0(const MatrixContext& context, const std::string& where, const std::function<void()>& step) {
  agree_on(context, [&] {
    if (context.rank != 0) return;
    try {
      step();
    } catch (const StorageError& error) {
      throw StorageError(where + ": " + error.what() + "; check that the directory exists, is writable and has room");
    } catch (const NotFoundError& error) {
      throw NotFoundError(where + ": " + error.what() + "; give the path of a file write_global() wrote");
    }
  });
}

// The first failure of a sequence of MPI-IO calls. Every rank makes each
// collective call of the sequence even after a failure (files report errors
// rather than abort), so that no rank waits for another at a call it
// skipped; check() agrees on the outcome at the end.
class IoStatus {
 public:
  void note(int status, const char* call) {
    if (status == MPI_SUCCESS || !failure_.empty()) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, text, &length);
    failure_ = std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(length));
  }
  bool ok() const { return failure_.empty(); }
  void check(const MatrixContext& context, const std::string& where, const char* hint) const {
    agree_on(context, [&] {
      if (!ok()) throw StorageError(where + ": " + failure_ + "; " + hint);
    });
  }

 private:
  std::string failure_;
};

// A committed MPI datatype, freed with its owner.
class OwnedType {
 public:
  OwnedType() = default;
  OwnedType(const OwnedType&) = delete;
  OwnedType& operator=(const OwnedType&) = delete;
  ~OwnedType() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  MPI_Datatype* out() { return &type_; }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// InvalidArgumentError unless MPI's int arguments (the darray's sizes and
// the table's count) hold this matrix. The same verdict on every rank.
void check_sizes(const MatrixLayout& layout, std::size_t element_bytes, const std::string& where) {
  const bool fits = layout.rows <= INT_MAX && layout.cols <= INT_MAX;
  const std::uint64_t bytes =
      fits ? static_cast<std::uint64_t>(layout.rows) * static_cast<std::uint64_t>(layout.cols) * element_bytes : 0;
  if (fits && (bytes + kGlobalPartBytes - 1) / kGlobalPartBytes <= INT_MAX / 8) return;  // the table's bytes too
  throw InvalidArgumentError(where + ": a " + std::to_string(layout.rows) + " x " + std::to_string(layout.cols) +
                             " matrix does not fit MPI-IO's int sizes (at most " + std::to_string(INT_MAX) +
                             " rows and columns); write it with checkpoint() instead");
}

// This rank's blocks as a part of the global array in `order` (a darray:
// MPI numbers its process grid row-major, as the layout does).
void make_file_type(const MatrixContext& context, MatrixOrder order, MPI_Datatype element, IoStatus& status,
                    OwnedType& type) {
  const MatrixLayout& layout = context.layout.layout();
  const int sizes[2] = {static_cast<int>(layout.rows), static_cast<int>(layout.cols)};
  const int distributions[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_CYCLIC};
  // A block longer than the matrix deals it out as one of the matrix's length.
  const int blocks[2] = {static_cast<int>(std::min(layout.row_block, layout.rows)),
                         static_cast<int>(std::min(layout.col_block, layout.cols))};
  const int grid[2] = {layout.grid_rows, layout.grid_cols};
  status.note(MPI_Type_create_darray(context.size, context.rank, 2, sizes, distributions, blocks, grid,
                                     order == MatrixOrder::kRowMajor ? MPI_ORDER_C : MPI_ORDER_FORTRAN, element,
                                     type.out()),
              "MPI_Type_create_darray");
  if (status.ok()) status.note(MPI_Type_commit(type.out()), "MPI_Type_commit");
}

// This rank's elements in the file's order, as one buffer: the local array
// itself for column-major files (ScaLAPACK's local array is the darray's
// column-major buffer), a row-major copy for row-major ones.
template <typename T>
class FileOrderPart {
 public:
  FileOrderPart(const MatrixContext& context, T* storage, MatrixOrder order)
      : storage_(storage),
        rows_(context.layout.rows().local_extent(context.layout.grid_row_of(context.rank))),
        cols_(context.layout.cols().local_extent(context.layout.grid_col_of(context.rank))),
        lld_(context.layout.leading_dimension(context.layout.grid_row_of(context.rank))),
        row_major_(order == MatrixOrder::kRowMajor) {
    if (row_major_) copy_.resize(static_cast<std::size_t>(rows_ * cols_));
    // Lines of `inner` elements, `outer` of them: MPI's int counts hold each.
    const std::int64_t inner = row_major_ ? cols_ : rows_;
    count_ = rows_ * cols_ == 0 ? 0 : static_cast<int>(row_major_ ? rows_ : cols_);
    if (count_ > 0) {
      MPI_Type_contiguous(static_cast<int>(inner), mpi_type<T>(), line_.out());
      MPI_Type_commit(line_.out());
    }
  }
  void* data() { return row_major_ ? static_cast<void*>(copy_.data()) : static_cast<void*>(storage_); }
  int count() const { return count_; }
  MPI_Datatype line() const { return count_ > 0 ? line_.get() : mpi_type<T>(); }
  // Before a write: the local array into the buffer; after a read: back.
  void gather() { transpose(true); }
  void scatter() { transpose(false); }

 private:
  // In tiles, so that both sides stay in cache; the inner loop runs along
  // the row-major copy's rows.
  void transpose(bool to_copy) {
    if (!row_major_) return;
    constexpr std::int64_t kTile = 16;
    for (std::int64_t i0 = 0; i0 < rows_; i0 += kTile) {
      const std::int64_t i_end = std::min(rows_, i0 + kTile);
      for (std::int64_t j0 = 0; j0 < cols_; j0 += kTile) {
        const std::int64_t j_end = std::min(cols_, j0 + kTile);
        for (std::int64_t i = i0; i < i_end; ++i) {
          T* copied = copy_.data() + i * cols_;
          if (to_copy) {
            for (std::int64_t j = j0; j < j_end; ++j) copied[j] = storage_[j * lld_ + i];
          } else {
            for (std::int64_t j = j0; j < j_end; ++j) storage_[j * lld_ + i] = copied[j];
          }
        }
      }
    }
  }

  T* storage_;
  std::int64_t rows_;
  std::int64_t cols_;
  std::int64_t lld_;
  bool row_major_;
  std::vector<T> copy_;
  OwnedType line_;
  int count_ = 0;
};

// The file's table as this matrix's elements give it: every rank's terms summed.
template <typename T>
std::vector<std::uint64_t> part_table(const MatrixContext& context, const T* storage, const GlobalHeader& header) {
  std::vector<std::uint64_t> table = local_part_sums(context.layout, context.rank, storage, header.order,
                                                     header.part_bytes / sizeof(T), header.parts_expected());
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, table.data(), static_cast<int>(table.size()), MPI_UINT64_T, MPI_SUM,
                          context.comm),
            "MPI_Allreduce");
  return table;
}

template <typename T>
GlobalHeader header_of(const MatrixContext& context, std::uint64_t epoch, MatrixOrder order) {
  GlobalHeader header;
  header.element_bytes = sizeof(T);
  header.order = order;
  header.rows = context.layout.layout().rows;
  header.cols = context.layout.layout().cols;
  header.epoch = epoch;
  header.parts = header.parts_expected();
  header.data_offset = header.data_offset_expected();
  return header;
}

std::string where_of(const char* call, const std::string& path) {
  return std::string(call) + ": file '" + path + "'";
}

// Writes the whole file under `temporary`, which rank 0 created empty.
template <typename T>
void write_temporary(const MatrixContext& context, T* storage, const GlobalHeader& header,
                     const std::vector<std::byte>& head, const std::string& temporary, const std::string& where) {
  IoStatus status;
  MPI_File file = MPI_FILE_NULL;
  status.note(MPI_File_open(context.comm, temporary.c_str(), MPI_MODE_WRONLY, MPI_INFO_NULL, &file), "MPI_File_open");
  status.check(context, where, "check that the directory exists and is writable");
  if (context.rank == 0) {
    status.note(MPI_File_write_at(file, 0, head.data(), static_cast<int>(head.size()), MPI_BYTE, MPI_STATUS_IGNORE),
                "MPI_File_write_at (the header)");
  }
  OwnedType file_type;
  make_file_type(context, header.order, mpi_type<T>(), status, file_type);
  FileOrderPart<T> part(context, storage, header.order);
  part.gather();
  status.note(MPI_File_set_view(file, static_cast<MPI_Offset>(header.data_offset), mpi_type<T>(),
                                status.ok() ? file_type.get() : mpi_type<T>(), "native", MPI_INFO_NULL),
              "MPI_File_set_view");
  status.note(MPI_File_write_all(file, part.data(), part.count(), part.line(), MPI_STATUS_IGNORE),
              "MPI_File_write_all");
  status.note(MPI_File_sync(file), "MPI_File_sync");
  status.note(MPI_File_close(&file), "MPI_File_close");
  status.check(context, where, "check that the file system has room");
}

}  // namespace

template <typename T>
void ConvergentMatrix<T>::write_global(const std::string& path, MatrixOrder order) {
  impl_->commit();
  const MatrixContext& context = impl_->context;
  const std::string where = where_of("ConvergentMatrix::write_global", path);
  check_sizes(context.layout.layout(), sizeof(T), where);
  const GlobalHeader header = header_of<T>(context, impl_->stats.commits, order);
  const std::vector<std::byte> head =
      encode_global_file_head(header, part_table(context, impl_->backend->storage(), header));
  char suffix[17] = {};
  on_rank_0(context, where, [&] { random_hex(8).copy(suffix, 16); });
  check_mpi(MPI_Bcast(suffix, 16, MPI_CHAR, 0, context.comm), "MPI_Bcast");
  const std::string temporary = path + ".partial-" + suffix;
  const std::shared_ptr<Env> env = Env::posix();
  on_rank_0(context, where, [&] { env->create(temporary, 0600)->close(); });
  try {
    write_temporary(context, impl_->backend->storage(), header, head, temporary, where);
  } catch (const Error&) {
    if (context.rank == 0) env->remove(temporary);
    throw;
  }
  // Every rank's bytes are synced: the file becomes `path` whole, or not at all.
  on_rank_0(context, where, [&] {
    try {
      env->rename(temporary, path);
    } catch (const Error&) {
      env->remove(temporary);
      throw;
    }
    const std::string directory = std::filesystem::path(path).parent_path().string();
    env->sync_dir(directory.empty() ? "." : directory);
  });
}

namespace {

// Rank 0: the header and table of the file at `path`, checked against the
// matrix that reads it (`here`) before any element is read.
std::vector<std::byte> read_head(const std::string& path, const GlobalHeader& here, const std::string& where) {
  const std::unique_ptr<ReadableFile> file = Env::posix()->open(path);
  const std::uint64_t size = file->size();
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(size, kGlobalHeaderBytes)));
  file->read_at(0, head.data(), head.size());
  const GlobalHeader written = decode_global_header(head, where);
  check_global_header(written, here, size, where);
  head.resize(kGlobalHeaderBytes + written.parts * 8);  // bounded: the parts follow from this matrix's shape
  file->read_at(kGlobalHeaderBytes, head.data() + kGlobalHeaderBytes, written.parts * 8);
  decode_global_table(std::span<const std::byte>(head).subspan(kGlobalHeaderBytes), written, where);
  return head;
}

template <typename T>
void read_elements(const MatrixContext& context, T* storage, const GlobalHeader& written, const std::string& path,
                   const std::string& where) {
  IoStatus status;
  MPI_File file = MPI_FILE_NULL;
  status.note(MPI_File_open(context.comm, path.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &file), "MPI_File_open");
  status.check(context, where, "check that every rank sees the file");
  OwnedType file_type;
  make_file_type(context, written.order, mpi_type<T>(), status, file_type);
  FileOrderPart<T> part(context, storage, written.order);
  status.note(MPI_File_set_view(file, static_cast<MPI_Offset>(written.data_offset), mpi_type<T>(),
                                status.ok() ? file_type.get() : mpi_type<T>(), "native", MPI_INFO_NULL),
              "MPI_File_set_view");
  status.note(MPI_File_read_all(file, part.data(), part.count(), part.line(), MPI_STATUS_IGNORE), "MPI_File_read_all");
  status.note(MPI_File_close(&file), "MPI_File_close");
  status.check(context, where, "check that every rank can read the file");
  part.scatter();
}

// CorruptionError naming the first part whose sum differs from the table's.
void check_parts(const std::vector<std::uint64_t>& found, const std::vector<std::uint64_t>& table,
                 const GlobalHeader& written, const std::string& where) {
  const auto differs = std::mismatch(found.begin(), found.end(), table.begin());
  if (differs.first == found.end()) return;
  const std::uint64_t part = static_cast<std::uint64_t>(differs.first - found.begin());
  const std::uint64_t first = written.data_offset + part * written.part_bytes;
  const std::uint64_t end = std::min(first + written.part_bytes, written.file_bytes());
  throw CorruptionError(where + " is damaged: part " + std::to_string(part) + " of " +
                        std::to_string(written.parts) + " (file bytes " + std::to_string(first) + " to " +
                        std::to_string(end) +
                        ") does not match its checksum; the matrix was zeroed: write the file again or read "
                        "another copy");
}

}  // namespace

template <typename T>
void ConvergentMatrix<T>::read_global(const std::string& path) {
  impl_->require_live();
  impl_->require_settled("ConvergentMatrix::read_global");
  const std::int64_t code = impl_->check.enter(CollectiveCall::kReadGlobal);
  impl_->converge(code, "read_global");  // nothing may land on the array while the file is read into it
  const MatrixContext& context = impl_->context;
  const std::string where = where_of("ConvergentMatrix::read_global", path);
  check_sizes(context.layout.layout(), sizeof(T), where);
  std::vector<std::byte> head;
  on_rank_0(context, where, [&] { head = read_head(path, header_of<T>(context, 0, MatrixOrder::kRowMajor), where); });
  std::uint64_t head_bytes = head.size();
  check_mpi(MPI_Bcast(&head_bytes, 1, MPI_UINT64_T, 0, context.comm), "MPI_Bcast");
  head.resize(static_cast<std::size_t>(head_bytes));  // rank 0 checked it against this matrix's shape
  check_mpi(MPI_Bcast(head.data(), static_cast<int>(head_bytes), MPI_BYTE, 0, context.comm), "MPI_Bcast");
  const GlobalHeader written = decode_global_header(head, where);
  const std::vector<std::uint64_t> table =
      decode_global_table(std::span<const std::byte>(head).subspan(kGlobalHeaderBytes), written, where);
  T* storage = impl_->backend->storage();
  try {
    read_elements(context, storage, written, path, where);
    check_parts(part_table(context, storage, written), table, written, where);
  } catch (const Error&) {
    std::fill_n(storage, impl_->storage_elements(), T{0});  // no rank keeps a damaged or partial part
    throw;
  }
  impl_->stats.commits = written.epoch;
  impl_->converge(code, "read_global");  // no rank updates an array another rank is still reading into
}

template void ConvergentMatrix<float>::write_global(const std::string&, MatrixOrder);
template void ConvergentMatrix<double>::write_global(const std::string&, MatrixOrder);
template void ConvergentMatrix<float>::read_global(const std::string&);
template void ConvergentMatrix<double>::read_global(const std::string&);

}  // namespace resurgo

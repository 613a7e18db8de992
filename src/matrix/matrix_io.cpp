// ConvergentMatrix's global-layout files (global_file.h; docs/matrix.md,
// "Global-layout files"). Each rank writes or reads large contiguous
// pieces of the file with one call each, as a plain file is written: its
// own blocks of lines where the grid splits no line, else a slab of the
// file (file_slabs.h) that the owners' elements are sent to (or from, when
// reading), whatever the grid. Each rank sums its pieces' part checksums
// (part_checksums.h). Rank 0 alone creates, renames and reads the header
// through the Env. Every step that may fail on some ranks only ends in an
// agreement: all ranks throw the same error, none waits in a collective
// call the others left.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/random.h"
#include "matrix/file_pieces.h"
#include "matrix/file_slabs.h"
#include "matrix/global_file.h"
#include "matrix/global_file_reader.h"
#include "matrix/local_rows.h"
#include "matrix/matrix_impl.h"
#include "matrix/mpi_call.h"
#include "matrix/mpi_io_calls.h"
#include "matrix/polite_wait.h"
#include "matrix/scratch_buffer.h"
#include "matrix/slab_collection.h"
#include "matrix/slab_delivery.h"
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
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, context.comm, &request), "MPI_Iallreduce");
  wait_politely(request);  // ranks that finished their step first leave the cores to the others
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

// Agrees on the outcome of a sequence of MPI-IO calls: the first failure
// of the lowest rank where one failed, thrown on every rank with `hint`.
void agree_on(const MatrixContext& context, const IoStatus& status, const std::string& where, const char* hint) {
  agree_on(context, [&] {
    if (!status.ok()) throw StorageError(where + ": " + status.failure() + "; " + hint);
  });
}

// InvalidArgumentError unless MPI's int counts hold the file's table (read
// and summed as one message). The same verdict on every rank.
void check_sizes(const MatrixLayout& layout, std::size_t element_bytes, const std::string& where) {
  constexpr std::uint64_t kMostParts = INT_MAX / 8;
  const std::uint64_t most_elements = kMostParts * kGlobalPartBytes / element_bytes;
  const auto rows = static_cast<std::uint64_t>(layout.rows);
  if (layout.cols == 0 || rows <= most_elements / static_cast<std::uint64_t>(layout.cols)) return;
  throw InvalidArgumentError(where + ": a " + std::to_string(layout.rows) + " x " + std::to_string(layout.cols) +
                             " matrix has more parts than MPI's int counts hold (at most " +
                             std::to_string(kMostParts) + " MiB of data); write it with checkpoint() instead");
}

// This rank's elements in the file's order, for the exchange with the
// slabs: the local array itself for column-major files (ScaLAPACK's
// column-major local array holds its columns and rows in ascending global
// order), stretches of its rows, transposed, for row-major ones.
template <typename T>
class FileOrderPart {
 public:
  FileOrderPart(const MatrixContext& context, T* storage, MatrixOrder order)
      : rows_{storage, context.layout.leading_dimension(context.layout.grid_row_of(context.rank)),
              context.layout.cols().local_extent(context.layout.grid_col_of(context.rank))},
        row_major_(order == MatrixOrder::kRowMajor) {}
  // When writing: where the elements come from.
  FileOrderSource<T> source() const {
    if (!row_major_) return FileOrderSource<T>{.in_place = rows_.storage};
    const LocalRows<T> rows = rows_;
    return FileOrderSource<T>{
        .take = [rows](std::uint64_t offset, std::uint64_t count, T* out) { rows.copy_out_at(offset, count, out); }};
  }
  // When reading: where the elements go.
  FileOrderSink<T> sink() const {
    if (!row_major_) return FileOrderSink<T>{.in_place = rows_.storage};
    const LocalRows<T> rows = rows_;
    return FileOrderSink<T>{.put = [rows](std::uint64_t offset, const T* elements, std::uint64_t count) {
      rows.copy_in_at(offset, elements, count);
    }};
  }

 private:
  LocalRows<T> rows_;
  bool row_major_;
};

// Per rank: where a stretch of a buffer starts, and its elements.
struct Stretches {
  std::vector<std::uint64_t> starts;
  std::vector<std::uint64_t> counts;
};

Stretches stretches_of(std::vector<std::uint64_t> counts) {
  Stretches stretches{std::vector<std::uint64_t>(counts.size(), 0), std::move(counts)};
  for (std::size_t i = 1; i < stretches.counts.size(); ++i) {
    stretches.starts[i] = stretches.starts[i - 1] + stretches.counts[i - 1];
  }
  return stretches;
}

// This rank's elements in file order, cut by the rank whose slab holds
// them: each holder counts its owners' elements, and one all-to-all tells
// the owners.
Stretches own_stretches(const MatrixContext& context, const FileSlabs& slabs) {
  std::vector<std::uint64_t> slab_counts = slabs.counts_from_owners(context.rank);
  std::vector<std::uint64_t> own_counts(slab_counts.size());
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(
      MPI_Ialltoall(slab_counts.data(), 1, MPI_UINT64_T, own_counts.data(), 1, MPI_UINT64_T, context.comm, &request),
      "MPI_Ialltoall");
  wait_politely(request);
  return stretches_of(std::move(own_counts));
}

// Whether the grid splits no line of the file (a row of a row-major file,
// a column of a column-major one) between ranks and its blocks of lines
// are large enough to be written with a call each (at least 16 KiB): then
// each rank writes and reads its own blocks of lines where they lie in the
// file, with no exchange.
template <typename T>
bool lines_whole(const BlockCyclic& layout, MatrixOrder order) {
  constexpr std::int64_t kLeastBlockBytes = 16 << 10;
  const MatrixLayout& shape = layout.layout();
  const bool row_major = order == MatrixOrder::kRowMajor;
  const std::int64_t block_elements = row_major ? std::min(shape.row_block, shape.rows) * shape.cols
                                                : std::min(shape.col_block, shape.cols) * shape.rows;
  const auto block_bytes = block_elements * static_cast<std::int64_t>(sizeof(T));
  return (row_major ? shape.grid_cols : shape.grid_rows) == 1 && block_bytes >= kLeastBlockBytes;
}

// This rank's blocks of lines when lines_whole(), a piece each: in place
// in the local array for a column-major file (its local columns are whole
// columns), through LocalRows for a row-major one, whole rows per chunk.
template <typename T>
std::vector<Piece<T>> own_lines(const MatrixContext& context, MatrixOrder order, T* storage) {
  const BlockCyclic& layout = context.layout;
  const bool row_major = order == MatrixOrder::kRowMajor;
  const CyclicAxis& lines = row_major ? layout.rows() : layout.cols();
  const int process = row_major ? layout.grid_row_of(context.rank) : layout.grid_col_of(context.rank);
  const auto line = static_cast<std::uint64_t>(row_major ? layout.layout().cols : layout.layout().rows);
  const std::int64_t local_lines = lines.local_extent(process);
  const LocalRows<T> rows{storage, layout.leading_dimension(layout.grid_row_of(context.rank)),
                          static_cast<std::int64_t>(line)};
  std::vector<Piece<T>> pieces;
  for (std::int64_t local = 0; local < local_lines; local += lines.block) {
    const auto count = static_cast<std::uint64_t>(std::min(lines.block, local_lines - local));
    const auto global = static_cast<std::uint64_t>(lines.global_index(local, process));
    Piece<T>& piece = pieces.emplace_back(Piece<T>{.first = global * line, .count = count * line});
    if (!row_major) {
      piece.in_place = storage + static_cast<std::uint64_t>(local) * line;
      continue;
    }
    piece.chunk = std::max<std::uint64_t>(1, kChunkBytes / sizeof(T) / line) * line;
    const auto line_of = [local, line](std::uint64_t at) { return local + static_cast<std::int64_t>(at / line); };
    piece.copy_out = [rows, line, line_of](std::uint64_t at, std::uint64_t n, T* out) {
      rows.copy_out(line_of(at), static_cast<std::int64_t>(n / line), out);
    };
    piece.copy_in = [rows, line, line_of](std::uint64_t at, std::uint64_t n, const T* in) {
      rows.copy_in(line_of(at), static_cast<std::int64_t>(n / line), in);
    };
  }
  return pieces;
}

// Sums every rank's terms of the file's table, waiting politely for the
// ranks still writing or reading.
void sum_table(const MatrixContext& context, std::vector<std::uint64_t>& table) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, table.data(), static_cast<int>(table.size()), MPI_UINT64_T, MPI_SUM,
                           context.comm, &request),
            "MPI_Iallreduce");
  wait_politely(request);
}

void write_at(MPI_File file, MPI_Offset offset, const std::byte* bytes, std::uint64_t total, IoStatus& status,
              const char* name) {
  in_calls(offset, bytes, total, status, name, [&](MPI_Offset at, const std::byte* from, int count, MPI_Status* moved) {
    return MPI_File_write_at(file, at, from, count, MPI_BYTE, moved);
  });
}

void read_at(MPI_File file, MPI_Offset offset, std::byte* bytes, std::uint64_t total, IoStatus& status) {
  in_calls(offset, bytes, total, status, "MPI_File_read_at",
           [&](MPI_Offset at, std::byte* into, int count, MPI_Status* moved) {
             return MPI_File_read_at(file, at, into, count, MPI_BYTE, moved);
           });
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

// A rank's pieces of a file to write, and for a slab the exchange that
// brings its elements (started once the file is open, settled after the
// last chunk).
template <typename T>
struct WritePlan {
  std::vector<Piece<T>> pieces;
  std::function<void()> start{};
  std::function<void()> settle{};
};

// This rank's slab as one piece, its chunks collected from their owners.
template <typename T>
WritePlan<T> slab_plan(const MatrixContext& context, const FileSlabs& slabs, SlabCollection<T>& collection) {
  Piece<T> slab{.first = slabs.first(context.rank), .count = slabs.elements(context.rank)};
  slab.copy_out = [&collection](std::uint64_t at, std::uint64_t n, T* out) { collection.collect(at, n, out); };
  return WritePlan<T>{{slab}, [&collection] { collection.start(); }, [&collection] { collection.finish(); }};
}

// Writes the whole file under `temporary`, which rank 0 created empty:
// each rank its pieces, then rank 0 the head, whose table sums every
// rank's terms (the same MPI calls on every rank even after a failure).
template <typename T>
void write_temporary(const MatrixContext& context, const WritePlan<T>& plan, const GlobalHeader& header,
                     const std::string& temporary, const std::string& where) {
  IoStatus status;
  MPI_File file = MPI_FILE_NULL;
  status.note(MPI_File_open(context.comm, temporary.c_str(), MPI_MODE_WRONLY, MPI_INFO_NULL, &file), "MPI_File_open");
  agree_on(context, status, where, "check that the directory exists and is writable");
  std::vector<std::uint64_t> table(header.parts_expected(), 0);
  if (plan.start) plan.start();
  write_pieces<T>(
      plan.pieces, header.part_bytes / sizeof(T), table, [&](std::uint64_t first, const T* data, std::uint64_t n) {
        const auto offset = static_cast<MPI_Offset>(header.data_offset + first * sizeof(T));
        write_at(file, offset, reinterpret_cast<const std::byte*>(data), n * sizeof(T), status, "MPI_File_write_at");
      });
  if (plan.settle) plan.settle();
  sum_table(context, table);
  if (context.rank == 0) {
    const std::vector<std::byte> head = encode_global_file_head(header, table);
    write_at(file, 0, head.data(), head.size(), status, "MPI_File_write_at (the header)");
  }
  status.note(MPI_File_sync(file), "MPI_File_sync");
  status.note(MPI_File_close(&file), "MPI_File_close");
  agree_on(context, status, where,
           "check that the file system has room and that no file size limit (ulimit -f) applies");
}

// A write's temporary: <path>.partial-<16 random hex digits>.
constexpr const char* kTemporaryInfix = ".partial-";
constexpr std::size_t kTemporaryDigits = 16;

std::string directory_of(const std::string& path) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  return directory.empty() ? "." : directory;
}

// The temporaries of `path` that writes killed part way left (a job's
// write of `path` started before this one and still running included:
// two jobs that write one path at once race anyway). None when the
// directory cannot be listed.
std::vector<std::string> stale_temporaries(Env& env, const std::string& path) {
  const std::string directory = directory_of(path);
  const std::string prefix = std::filesystem::path(path).filename().string() + kTemporaryInfix;
  std::vector<std::string> stale;
  try {
    for (const std::string& name : env.list_dir(directory)) {
      const bool named = name.size() == prefix.size() + kTemporaryDigits && name.compare(0, prefix.size(), prefix) == 0;
      if (named && name.find_first_not_of("0123456789abcdef", prefix.size()) == std::string::npos) {
        stale.push_back(directory + "/" + name);
      }
    }
  } catch (const Error&) {
  }
  return stale;
}

// Every rank's bytes are synced: the temporary becomes `path` whole, or
// not at all. Then the `stale` temporaries of killed writes, which can
// never become the file, are removed (a failure to is logged: the file is
// written).
void replace_file(Env& env, const std::string& temporary, const std::string& path,
                  const std::vector<std::string>& stale) {
  try {
    env.rename(temporary, path);
  } catch (const Error&) {
    env.remove(temporary);
    throw;
  }
  env.sync_dir(directory_of(path));
  for (const std::string& left : stale) {
    try {
      env.remove(left);
    } catch (const Error& error) {
      Logger("matrix", LogLevel::kWarn)
          .warn("ConvergentMatrix::write_global: '" + path + "' is written, but the temporary '" + left +
                "' of an earlier write that was killed could not be removed: " + error.what());
    }
  }
}

}  // namespace

template <typename T>
void ConvergentMatrix<T>::write_global(const std::string& path, MatrixOrder order) {
  impl_->commit();
  const MatrixContext& context = impl_->context;
  const std::string where = global_file_where("ConvergentMatrix::write_global", path);
  check_sizes(context.layout.layout(), sizeof(T), where);
  const GlobalHeader header = header_of<T>(context, impl_->stats.commits, order);
  T* storage = impl_->backend->storage();
  const FileSlabs slabs(context.layout, context.size, order, header.part_bytes / sizeof(T));
  const bool whole = lines_whole<T>(context.layout, order);
  FileOrderPart<T> part(context, storage, order);
  std::optional<SlabCollection<T>> collection;
  WritePlan<T> plan;
  if (whole) {
    plan.pieces = own_lines(context, order, storage);
  } else {
    collection.emplace(context, slabs, part.source(), kChunkBytes / sizeof(T));
    plan = slab_plan(context, slabs, *collection);
  }
  char suffix[kTemporaryDigits + 1] = {};
  on_rank_0(context, where, [&] { random_hex(kTemporaryDigits / 2).copy(suffix, kTemporaryDigits); });
  check_mpi(MPI_Bcast(suffix, kTemporaryDigits, MPI_CHAR, 0, context.comm), "MPI_Bcast");
  const std::string temporary = path + kTemporaryInfix + suffix;
  const std::shared_ptr<Env> env = Env::posix();
  std::vector<std::string> stale;
  on_rank_0(context, where, [&] {
    stale = stale_temporaries(*env, path);
    env->create(temporary, 0600)->close();
  });
  try {
    write_temporary(context, plan, header, temporary, where);
  } catch (const Error&) {
    if (context.rank == 0) env->remove(temporary);
    throw;
  }
  on_rank_0(context, where, [&] { replace_file(*env, temporary, path, stale); });
}

namespace {

// Reads this rank's pieces of the file, then runs `settle` (the end of
// the slab exchange); the table of their terms, summed over every rank.
// Every chunk goes on to its copy_in even after a failed read, so that no
// owner waits for elements that never come; the ranks agree on the
// failure after `settle`.
template <typename T>
std::vector<std::uint64_t> read_file_pieces(const MatrixContext& context, const std::vector<Piece<T>>& pieces,
                                            const GlobalHeader& written, const std::string& path,
                                            const std::string& where, const std::function<void()>& settle = {}) {
  IoStatus status;
  MPI_File file = MPI_FILE_NULL;
  status.note(MPI_File_open(context.comm, path.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &file), "MPI_File_open");
  agree_on(context, status, where, "check that every rank sees the file");
  std::vector<std::uint64_t> table(written.parts, 0);
  read_pieces<T>(pieces, written.part_bytes / sizeof(T), table, [&](std::uint64_t first, T* data, std::uint64_t n) {
    const auto offset = static_cast<MPI_Offset>(written.data_offset + first * sizeof(T));
    read_at(file, offset, reinterpret_cast<std::byte*>(data), n * sizeof(T), status);
  });
  if (settle) settle();
  status.note(MPI_File_close(&file), "MPI_File_close");
  agree_on(context, status, where, "check that every rank can read the file");
  sum_table(context, table);
  return table;
}

// Reads this rank's slab of the file, its chunks delivered to their owners
// as they are read (slab_delivery.h); the table of the slab's terms,
// summed over every rank.
template <typename T>
std::vector<std::uint64_t> read_slab(const MatrixContext& context, T* storage, const GlobalHeader& written,
                                     const std::string& path, const std::string& where) {
  const FileSlabs slabs(context.layout, context.size, written.order, written.part_bytes / sizeof(T));
  Stretches own = own_stretches(context, slabs);
  const FileOrderPart<T> part(context, storage, written.order);
  Piece<T> piece{.first = slabs.first(context.rank), .count = slabs.elements(context.rank)};
  SlabDelivery<T> delivery(context, slabs, std::move(own.starts), std::move(own.counts), part.sink(), piece.chunk);
  piece.copy_in = [&delivery](std::uint64_t at, std::uint64_t n, const T* in) { delivery.deliver(at, n, in); };
  return read_file_pieces<T>(context, {piece}, written, path, where, [&delivery] { delivery.finish(); });
}

}  // namespace

template <typename T>
void ConvergentMatrix<T>::read_global(const std::string& path) {
  impl_->require_live();
  impl_->require_settled("ConvergentMatrix::read_global");
  const std::int64_t code = impl_->check.enter(CollectiveCall::kReadGlobal);
  impl_->converge(code, "read_global");  // nothing may land on the array while the file is read into it
  const MatrixContext& context = impl_->context;
  const std::string where = global_file_where("ConvergentMatrix::read_global", path);
  check_sizes(context.layout.layout(), sizeof(T), where);
  std::vector<std::byte> head;
  on_rank_0(context, where, [&] {
    const GlobalHeader here = header_of<T>(context, 0, MatrixOrder::kRowMajor);
    head = read_global_head(*Env::posix()->open(path), &here, where);
  });
  std::uint64_t head_bytes = head.size();
  check_mpi(MPI_Bcast(&head_bytes, 1, MPI_UINT64_T, 0, context.comm), "MPI_Bcast");
  head.resize(static_cast<std::size_t>(head_bytes));  // rank 0 checked it against this matrix's shape
  check_mpi(MPI_Bcast(head.data(), static_cast<int>(head_bytes), MPI_BYTE, 0, context.comm), "MPI_Bcast");
  const GlobalHeader written = decode_global_header(head, where);
  const std::vector<std::uint64_t> table =
      decode_global_table(std::span<const std::byte>(head).subspan(kGlobalHeaderBytes), written, where);
  T* storage = impl_->backend->storage();
  try {
    const std::vector<std::uint64_t> sums =
        lines_whole<T>(context.layout, written.order)
            ? read_file_pieces(context, own_lines(context, written.order, storage), written, path, where)
            : read_slab(context, storage, written, path, where);
    check_global_parts(sums, table, written, where, "the matrix was zeroed");
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

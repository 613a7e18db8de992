#include "gpu/registration_token.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <thread>
#include <utility>

#include "resurgo/errors.hpp"

namespace resurgo::gpu {

namespace {

constexpr std::size_t kLongestName = 200;
constexpr auto kFirstPoll = std::chrono::milliseconds(1);
constexpr auto kLongestPoll = std::chrono::milliseconds(16);
// A queue update takes microseconds; a guard held longer belongs to a
// stopped process, and the waiter polls again rather than wait for it.
constexpr auto kGuardPatience = std::chrono::milliseconds(50);
constexpr auto kGuardPoll = std::chrono::microseconds(50);
constexpr std::size_t kLongestQueue = 64;  // "next <20 digits> serving <20 digits>\n"

// A ticket's flock, its file removed before the flock goes: removal
// without the guard is safe because a number is never handed out twice.
class TicketLock final : public FileLock {
 public:
  TicketLock(std::shared_ptr<Directory> directory, std::string file, std::unique_ptr<FileLock> lock)
      : directory_(std::move(directory)), file_(std::move(file)), lock_(std::move(lock)) {}
  ~TicketLock() override {
    try {
      directory_->remove(file_);
    } catch (const StorageError&) {
      // Left behind, unlocked: the next waiter that reaches it removes it.
    }
  }

 private:
  std::shared_ptr<Directory> directory_;
  std::string file_;
  std::unique_ptr<FileLock> lock_;
};

// The number `text` starts with, its end in `*rest`; false if none.
bool parse_number(std::string_view text, std::string_view label, std::uint64_t* value, std::string_view* rest) {
  if (text.substr(0, label.size()) != label) return false;
  text.remove_prefix(label.size());
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  if (error != std::errc() || end == text.data()) return false;
  *rest = text.substr(static_cast<std::size_t>(end - text.data()));
  return true;
}

// Why `name` cannot name a lock file, or "" when it can.
std::string name_problem(const std::string& name) {
  if (name.empty()) return "it is empty";
  if (name.size() > kLongestName) return "it is longer than " + std::to_string(kLongestName) + " bytes";
  if (name.find('/') != std::string::npos) return "it contains '/'";
  if (name.find("..") != std::string::npos) return "it contains \"..\"";
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return "it contains a control character";
  }
  return "";
}

}  // namespace

RegistrationToken::RegistrationToken(std::string directory, const std::string& name,
                                     std::chrono::milliseconds patience)
    : patience_(patience) {
  const std::string problem = name_problem(name);
  if (!problem.empty()) {
    throw InvalidArgumentError("registration token name '" + name + "' is invalid: " + problem +
                               " (use letters, digits, '-', '_' or '.')");
  }
  if (directory.empty()) directory = kDefaultDirectory;
  if (directory.back() != '/') directory += '/';
  // A directory of the user's own: the shared one (/dev/shm) is writable by
  // every user, who could hold or plant a file of any name there.
  directory_ = directory + "resurgo-" + std::to_string(::geteuid());
  name_ = name;
  file_ = name + ".lock";
  path_ = directory_ + "/" + file_;
}

std::unique_ptr<Directory> RegistrationToken::open_directory() const {
  try {
    // Not the store's Env: the token is no file of a store, and its
    // fault-injecting Envs have nothing to test here.
    return Env::posix()->open_directory(directory_, DirectoryRules{});
  } catch (const StorageError& error) {
    throw StorageError("cannot open the pin registration token " + path_ + ": " + error.what() +
                       "; choose a directory every process of the node sees ([buffer] pin_token_dir)");
  }
}

std::unique_ptr<FileLock> RegistrationToken::try_lock(Directory& directory) const {
  try {
    return directory.lock(file_);
  } catch (const StateError&) {
    return nullptr;  // another process or token object holds it
  } catch (const StorageError& error) {
    throw StorageError("cannot lock the pin registration token " + path_ + ": " + error.what());
  }
}

std::unique_ptr<FileLock> RegistrationToken::lock_guard(Directory& directory) const {
  const std::string file = name_ + ".guard";
  const auto deadline = std::chrono::steady_clock::now() + kGuardPatience;
  for (;;) {
    try {
      return directory.lock(file);
    } catch (const StateError&) {
      if (std::chrono::steady_clock::now() >= deadline) return nullptr;
    } catch (const StorageError& error) {
      throw StorageError("cannot lock the queue of the pin registration token " + path_ + ": " + error.what());
    }
    std::this_thread::sleep_for(kGuardPoll);
  }
}

RegistrationToken::Queue RegistrationToken::read_queue(Directory& directory) const {
  const std::string file = name_ + ".queue";
  std::string text;
  try {
    const std::unique_ptr<ReadableFile> queue = directory.open(file);
    if (queue->size() > kLongestQueue) {
      throw StorageError("it is longer than " + std::to_string(kLongestQueue) +
                         " bytes; remove it while no process of the node waits for the token");
    }
    text.resize(queue->size());
    queue->read_at(0, text.data(), text.size());
  } catch (const NotFoundError&) {
    return Queue{};  // nobody has queued yet
  } catch (const StorageError& error) {
    throw StorageError("cannot read the queue of the pin registration token " + path_of(file) + ": " + error.what());
  }
  Queue queue;
  std::string_view rest;
  if (parse_number(text, "next ", &queue.next, &rest) && parse_number(rest, " serving ", &queue.serving, &rest) &&
      rest == "\n" && queue.serving <= queue.next) {
    return queue;
  }
  throw StorageError("the queue of the pin registration token " + path_of(file) + " is damaged ('" +
                     text.substr(0, text.find('\n')) +
                     "'); remove it while no process of the node waits for the token");
}

// Replaced whole, so that a process killed while writing leaves the old one.
void RegistrationToken::write_queue(Directory& directory, const Queue& queue) const {
  const std::string file = name_ + ".queue";
  const std::string text = "next " + std::to_string(queue.next) + " serving " + std::to_string(queue.serving) + "\n";
  try {
    directory.remove(file + ".new");  // left by a process killed while writing
    const std::unique_ptr<WritableFile> written = directory.create(file + ".new", 0600);
    written->append(text.data(), text.size());
    written->sync();
    written->close();
    directory.rename(file + ".new", file);
  } catch (const StorageError& error) {
    throw StorageError("cannot write the queue of the pin registration token " + path_of(file) + ": " +
                       error.what() + "; check the space and permissions of " + directory_);
  }
}

std::string RegistrationToken::ticket_file(std::uint64_t number) const {
  return name_ + ".ticket-" + std::to_string(number);
}

std::unique_ptr<FileLock> RegistrationToken::take_ticket(const std::shared_ptr<Directory>& directory,
                                                         std::uint64_t* number) const {
  const std::unique_ptr<FileLock> guard = lock_guard(*directory);
  if (!guard) return nullptr;
  Queue queue = read_queue(*directory);
  // A queue removed by hand restarts at 0: skip the numbers still in use.
  while (directory->exists(ticket_file(queue.next))) ++queue.next;
  *number = queue.next++;
  const std::string file = ticket_file(*number);
  std::unique_ptr<FileLock> lock;
  try {
    lock = directory->lock(file);
  } catch (const StorageError& error) {  // StateError cannot happen: the file was just made under the guard
    throw StorageError("cannot take a ticket of the pin registration token " + path_of(file) + ": " + error.what());
  }
  auto ticket = std::make_unique<TicketLock>(directory, file, std::move(lock));
  write_queue(*directory, queue);
  return ticket;
}

bool RegistrationToken::ticket_waits(Directory& directory, std::uint64_t number) const {
  const std::string file = ticket_file(number);
  if (!directory.exists(file)) return false;  // served, or given up
  try {
    const std::unique_ptr<FileLock> dead = directory.lock(file);
    directory.remove(file);  // its waiter died: skip it
    return false;
  } catch (const StateError&) {
    return true;  // its waiter holds it
  } catch (const StorageError& error) {
    throw StorageError("cannot check a ticket of the pin registration token " + path_of(file) + ": " + error.what());
  }
}

bool RegistrationToken::is_turn(Directory& directory, std::uint64_t number) const {
  const std::unique_ptr<FileLock> guard = lock_guard(directory);
  if (!guard) return false;
  Queue queue = read_queue(directory);
  const std::uint64_t serving = queue.serving;
  while (queue.serving < number && !ticket_waits(directory, queue.serving)) ++queue.serving;
  queue.next = std::max(queue.next, queue.serving);  // a queue removed by hand restarted below us
  if (queue.serving != serving) write_queue(directory, queue);
  return queue.serving >= number;
}

RegistrationToken::Hold RegistrationToken::try_acquire() const {
  const auto now = std::chrono::steady_clock::now();
  return poll(&now, {});
}

RegistrationToken::Hold RegistrationToken::acquire_for(std::chrono::milliseconds timeout,
                                                       const std::function<bool()>& give_up) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  return poll(&deadline, give_up);
}

RegistrationToken::Hold RegistrationToken::acquire(const std::function<bool()>& give_up) const {
  if (patience_ == kForever) return poll(nullptr, give_up);
  const auto deadline = std::chrono::steady_clock::now() + patience_;
  Hold hold = poll(&deadline, give_up);
  if (hold || std::chrono::steady_clock::now() < deadline) return hold;  // ours, or given up when asked
  throw StateError("the pin registration token " + path_ + " was held by other processes, or waited for before us, "
                   "for " + std::to_string(patience_.count()) +
                   " ms ([buffer] pin_token_timeout); gave up waiting for it");
}

// A blocking flock(LOCK_EX) cannot be interrupted but by a signal, and a
// buffer being destroyed must stop waiting: poll (LOCK_NB). The ticket,
// dropped on the way out unless the token is ours, keeps our place.
RegistrationToken::Hold RegistrationToken::poll(const std::chrono::steady_clock::time_point* deadline,
                                                const std::function<bool()>& give_up) const {
  const std::shared_ptr<Directory> directory = open_directory();
  std::unique_ptr<FileLock> ticket;
  std::uint64_t number = 0;
  auto pause = kFirstPoll;
  for (;;) {
    if (!ticket) ticket = take_ticket(directory, &number);
    if (ticket && is_turn(*directory, number)) {
      if (std::unique_ptr<FileLock> lock = try_lock(*directory)) return Hold(std::move(lock), std::move(ticket));
    }
    if ((deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) || (give_up && give_up())) {
      return Hold();
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, kLongestPoll);
  }
}

}  // namespace resurgo::gpu

// What a reader says when it refuses a hostile file.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <initializer_list>
#include <string>

namespace resurgo::security {

// The message of the E that `read` throws; a test failure when it returns
// or throws anything else.
template <class E, class F>
std::string refusal(F&& read) {
  try {
    read();
  } catch (const E& error) {
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "refused with another exception: " << error.what();
    return "";
  }
  ADD_FAILURE() << "accepted";
  return "";
}

// Every part must appear in `message`: the file, the object, the cause.
inline void expect_mentions(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
  }
}

}  // namespace resurgo::security

// What a test reads of a thrown error: its message, and whether a text
// holds a part (printing the text when it does not).
#pragma once

#include <gtest/gtest.h>

#include <string>

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

namespace resurgo {

// The message of the E that `body` throws; "" when it throws none (which a
// check of the message's content then reports).
template <class E, class Body>
std::string message_of(Body&& body) {
  try {
    body();
  } catch (const E& error) {
    return error.what();
  }
  return "";
}

}  // namespace resurgo

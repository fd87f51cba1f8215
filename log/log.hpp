// One readable line per event on stderr, with a UTC timestamp. Thread-safe.
#pragma once

#include <string>

namespace rsc::log {

enum class Level { Info, Warn, Error };
void line(Level level, const std::string& message);
inline void info(const std::string& m) { line(Level::Info, m); }
inline void warn(const std::string& m) { line(Level::Warn, m); }
inline void error(const std::string& m) { line(Level::Error, m); }
// Tests silence the log.
void set_enabled(bool on);

}  // namespace rsc::log

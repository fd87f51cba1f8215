#include "redis/result.hpp"

namespace rsc::store {

std::string to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::Retryable: return "retryable";
    case ErrorKind::Fatal: return "fatal";
    case ErrorKind::Corrupt: return "corrupt";
    case ErrorKind::Invalid: return "invalid";
  }
  return "?";
}

}  // namespace rsc::store

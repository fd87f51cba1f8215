#include "group/rack_zones.hpp"

#include <set>

#include "protocol/codec.hpp"

namespace rsc::group {

namespace {
std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}
}  // namespace

ParsedNodeZones parse_node_zones(std::string_view text) {
  ParsedNodeZones out;
  if (trimmed(text).empty()) return out;
  for (std::size_t from = 0; from <= text.size();) {
    const auto comma = text.find(',', from);
    const auto item = trimmed(text.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    from = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    const auto eq = item.find('=');
    const auto node = eq == std::string_view::npos ? std::string_view() : trimmed(item.substr(0, eq));
    const auto zone = eq == std::string_view::npos ? std::string_view() : trimmed(item.substr(eq + 1));
    const auto colon = node.rfind(':');
    const bool port = colon != std::string_view::npos && colon > 0 && colon + 1 < node.size() &&
                      node.find_first_not_of("0123456789", colon + 1) == std::string_view::npos;
    if (!port || zone.empty() || !protocol::valid_name(zone)) {
      out.zones.clear();
      out.error = "'" + std::string(item.substr(0, 140)) + "' is not host:port=zone (a zone matches [A-Za-z0-9._:-]{1,128})";
      return out;
    }
    if (!out.zones.emplace(std::string(node), std::string(zone)).second) {
      out.zones.clear();
      out.error = "node " + std::string(node) + " is given a zone twice";
      return out;
    }
  }
  return out;
}

RacksFromZones racks_from_zones(const std::vector<std::string>& shardNodes, const NodeZones& zones) {
  RacksFromZones out;
  std::set<std::string> unknown;
  out.racks.reserve(shardNodes.size());
  for (const auto& node : shardNodes) {
    const auto it = zones.find(node);
    if (it == zones.end()) unknown.insert(node);
    else out.racks.push_back(it->second);
  }
  if (!unknown.empty()) {
    std::string names;
    for (const auto& n : unknown) names += (names.empty() ? "" : ", ") + n;
    out.racks.clear();
    out.refusal = "no zone for the Redis node" + std::string(unknown.size() > 1 ? "s " : " ") + names +
                  " serving some of the shards (--redis-node-zones names them as CLUSTER SLOTS does)";
    if (zones.empty())  // the node(s) still named: the operator maps exactly those
      out.refusal = "this coordinator knows no zone of any Redis node, so none for the node" +
                    std::string(unknown.size() > 1 ? "s " : " ") + names +
                    " serving the shards (start it with --redis-node-zones host:port=zone,...)";
  }
  return out;
}

}  // namespace rsc::group

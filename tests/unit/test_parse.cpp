#include <catch2/catch.hpp>

#include "common/parse.hpp"

using namespace trn::common;

TEST_CASE("parse_uint accepts plain decimals only") {
  CHECK(parse_uint("0") == 0u);
  CHECK(parse_uint("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parse_uint(""));
  CHECK_FALSE(parse_uint("-1"));
  CHECK_FALSE(parse_uint("+1"));
  CHECK_FALSE(parse_uint(" 1"));
  CHECK_FALSE(parse_uint("1x"));
  CHECK_FALSE(parse_uint("18446744073709551616"));
}

TEST_CASE("parse_bytes understands binary suffixes and rejects overflow") {
  CHECK(parse_bytes("4096") == 4096u);
  CHECK(parse_bytes("96GiB") == 96ull << 30);
  CHECK(parse_bytes("96 GiB") == 96ull << 30);
  CHECK(parse_bytes("8g") == 8ull << 30);
  CHECK(parse_bytes("2M") == 2ull << 20);
  CHECK(parse_bytes("1kib") == 1024u);
  CHECK(parse_bytes("3T") == 3ull << 40);
  CHECK(parse_bytes("12B") == 12u);
  CHECK_FALSE(parse_bytes("GiB"));
  CHECK_FALSE(parse_bytes("1.5G"));
  CHECK_FALSE(parse_bytes("5X"));
  CHECK_FALSE(parse_bytes("99999999999999999T"));
}

TEST_CASE("parse_index_list takes indices, ranges and comma lists") {
  std::string why;
  CHECK(parse_index_list("3", &why) == std::vector<uint32_t>{3});
  CHECK(parse_index_list("0-3", &why) == std::vector<uint32_t>{0, 1, 2, 3});
  CHECK(parse_index_list("5,0-1,1", &why) == std::vector<uint32_t>{0, 1, 5});
  for (const char *bad : {"", "a", "1,,2", "3-1", "0-", "-1", "1-x", ",", "1,", "99999999"}) {
    INFO(bad);
    CHECK_FALSE(parse_index_list(bad, &why));
    CHECK_FALSE(why.empty());
  }
}

TEST_CASE("formatting of sizes and index lists") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(96ull << 30) == "96 GiB");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_index_list({}) == "");
  CHECK(format_index_list({0, 1, 2, 3, 6, 8, 9}) == "0-3,6,8-9");
  CHECK(format_index_list({7}) == "7");
}

// SafetensorsFile: every dtype converted exactly (F16 and BF16 against a reference computed here
// from the IEEE definitions, over all 65536 bit patterns), and every refusal naming file and tensor.
#include "checkpoint/safetensors.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint_test_support.hpp"

namespace rcsweep::checkpoint {
namespace {

using test::config_error;
using test::safetensors_bytes;
using test::TempDir;
using test::Writer;

// A 16-bit IEEE 754 binary format: 1 sign, `e` exponent bits (bias 2^(e-1) - 1), 15 - e mantissa
// bits (IEEE 754-2008 §3.4, §3.6): subnormals at exponent 0, inf and NaN at its maximum.
double reference_16bit(std::uint16_t b, int e) {
  const int m = 15 - e, bias = (1 << (e - 1)) - 1;
  const int sign = b >> 15, exponent = (b >> m) & ((1 << e) - 1), mantissa = b & ((1 << m) - 1);
  double magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(mantissa, 1 - bias - m);
  else if (exponent == (1 << e) - 1)
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else
    magnitude = std::ldexp((1 << m) + mantissa, exponent - bias - m);
  return sign ? -magnitude : magnitude;
}
double reference_half(std::uint16_t b) { return reference_16bit(b, 5); }      // binary16
double reference_bfloat16(std::uint16_t b) { return reference_16bit(b, 8); }  // bfloat16

// Same value, same sign (so -0 differs from +0); NaN equals NaN of the same sign.
void expect_same(double got, double want, std::uint32_t bits) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
  } else {
    EXPECT_EQ(got, want) << std::hex << bits;
  }
  EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << bits;
}

TEST(Safetensors, HalfEveryBitPatternIsExact) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const double got = half_to_double(static_cast<std::uint16_t>(b));
    expect_same(got, reference_half(static_cast<std::uint16_t>(b)), b);
    if (std::isnan(got)) {  // the payload survives
      EXPECT_EQ((std::bit_cast<std::uint64_t>(got) >> 42) & 1023, b & 1023) << std::hex << b;
    }
  }
  EXPECT_EQ(half_to_double(0x3c00), 1.0);
  EXPECT_EQ(half_to_double(0xc000), -2.0);
  EXPECT_EQ(half_to_double(0x7bff), 65504.0);
  EXPECT_EQ(half_to_double(0x0001), 0x1p-24);    // smallest subnormal
  EXPECT_EQ(half_to_double(0x03ff), 0x3ffp-24);  // largest subnormal
  EXPECT_EQ(half_to_double(0x0400), 0x1p-14);    // smallest normal
  EXPECT_EQ(half_to_double(0xfc00), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::signbit(half_to_double(0x8000)));
}

TEST(Safetensors, BFloat16EveryBitPatternIsExact) {
  for (std::uint32_t b = 0; b < 65536; ++b)
    expect_same(bfloat16_to_double(static_cast<std::uint16_t>(b)), reference_bfloat16(static_cast<std::uint16_t>(b)),
                b);
  EXPECT_EQ(bfloat16_to_double(0x3f80), 1.0);
  EXPECT_EQ(bfloat16_to_double(0xc040), -3.0);
  EXPECT_EQ(bfloat16_to_double(0x0001), 0x1p-133);
  EXPECT_EQ(bfloat16_to_double(0x7f7f), 0x1.fep127);
  EXPECT_EQ(bfloat16_to_double(0x7f80), std::numeric_limits<double>::infinity());
}

// The vectorised loops of convert_to_double give the bits of the scalar conversions, from an
// unaligned start, for every F16 and BF16 pattern.
TEST(Safetensors, ConversionLoopsMatchTheScalarConversionsBitwise) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t b = 0; b < all.size(); ++b) all[b] = static_cast<std::uint16_t>(b);
  const std::string bytes = " " + test::bytes_of(all);
  const auto in = std::as_bytes(std::span(bytes)).subspan(1);
  std::vector<double> out(all.size());
  convert_to_double(Dtype::F16, in, out);
  for (std::size_t b = 0; b < all.size(); ++b)
    ASSERT_EQ(std::bit_cast<std::uint64_t>(out[b]), std::bit_cast<std::uint64_t>(half_to_double(all[b]))) << b;
  convert_to_double(Dtype::BF16, in, out);
  for (std::size_t b = 0; b < all.size(); ++b)
    ASSERT_EQ(std::bit_cast<std::uint64_t>(out[b]), std::bit_cast<std::uint64_t>(bfloat16_to_double(all[b]))) << b;
  std::vector<float> floats(1000);
  for (std::size_t i = 0; i < floats.size(); ++i)
    floats[i] = std::bit_cast<float>(static_cast<std::uint32_t>(i * 4294967u));
  const std::string fbytes = "   " + test::bytes_of(floats);
  std::vector<double> fout(floats.size());
  convert_to_double(Dtype::F32, std::as_bytes(std::span(fbytes)).subspan(3), fout);
  for (std::size_t i = 0; i < floats.size(); ++i) {
    if (std::isnan(floats[i])) {
      ASSERT_TRUE(std::isnan(fout[i])) << i;
    } else {
      ASSERT_EQ(fout[i], static_cast<double>(floats[i])) << i;
    }
  }
}

TEST(Safetensors, RoundTripOfEveryDtype) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> f64{3.141592653589793, -0.0, 1e-310, -inf, nan, 1e300};
  const std::vector<float> f32{1.5f, -0.0f, 1e-40f, std::numeric_limits<float>::infinity(), 3.4e38f, -7.25f};
  const std::vector<std::uint16_t> f16{0x3c00, 0x8001, 0x7bff, 0xfc00, 0x7e01, 0x0000};
  const std::vector<std::uint16_t> bf16{0x3f80, 0x8001, 0x7f7f, 0xff80, 0x7fc1, 0x4049};
  TempDir dir;
  // A 1-byte tensor first: every later tensor starts at an odd offset (unaligned reads).
  Writer w;
  w.add("odd", "U8", "[1]", std::string(1, '\x07'))
      .add("a.f64", "F64", "[2,3]", test::bytes_of(f64))
      .add("b.f32", "F32", "[6]", test::bytes_of(f32))
      .add("c.f16", "F16", "[3,2]", test::bytes_of(f16))
      .add("d.bf16", "BF16", "[1,6]", test::bytes_of(bf16))
      .metadata(R"({"format":"pt","note":"tiny"})")
      .write(dir / "m.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(dir / "m.safetensors");
  EXPECT_EQ(file.file_bytes(), std::filesystem::file_size(dir / "m.safetensors"));
  ASSERT_EQ(file.tensors().size(), 5u);
  EXPECT_EQ(file.tensors()[0].name, "a.f64");  // sorted by name
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.tensor("c.f16").dtype, Dtype::F16);
  EXPECT_EQ(file.tensor("c.f16").shape, (std::vector<std::size_t>{3, 2}));

  const auto got64 = file.values("a.f64");
  for (std::size_t i = 0; i < f64.size(); ++i) expect_same(got64[i], f64[i], static_cast<std::uint32_t>(i));
  const auto got32 = file.values("b.f32");
  for (std::size_t i = 0; i < f32.size(); ++i)
    expect_same(got32[i], static_cast<double>(f32[i]), static_cast<std::uint32_t>(i));
  const auto got16 = file.values("c.f16");
  for (std::size_t i = 0; i < f16.size(); ++i) expect_same(got16[i], reference_half(f16[i]), f16[i]);
  const auto gotbf = file.values("d.bf16");
  for (std::size_t i = 0; i < bf16.size(); ++i) expect_same(gotbf[i], reference_bfloat16(bf16[i]), bf16[i]);
  EXPECT_EQ(gotbf[5], 3.140625);  // 0x4049

  const Matrix m = file.matrix("c.f16");
  EXPECT_EQ(m.rows(), 3u);
  EXPECT_EQ(m.cols(), 2u);
  EXPECT_EQ(m(1, 0), 65504.0);
  EXPECT_TRUE(std::isnan(m(2, 0)));
  EXPECT_EQ(m(0, 1), -0x1p-24);
  EXPECT_EQ(file.matrix("b.f32").rows(), 1u);
  EXPECT_EQ(file.raw("odd").size(), 1u);
  file.expect("a.f64", {2, 3});
}

TEST(Safetensors, EmptyAndScalarTensors) {
  Writer w;
  w.add("empty", "F32", "[0,4]", "").add("scalar", "F64", "[]", test::bytes_of(std::vector<double>{2.5}));
  const std::string bytes = w.bytes();
  const SafetensorsFile file = SafetensorsFile::parse(std::as_bytes(std::span(bytes)), "mem.safetensors");
  EXPECT_TRUE(file.values("empty").empty());
  EXPECT_EQ(file.matrix("scalar")(0, 0), 2.5);
}

// The message of parsing `bytes`: it must name the file.
std::string refusal(const std::string& bytes) {
  const std::string message = config_error(
      [&] { (void)SafetensorsFile::parse(std::as_bytes(std::span(bytes)), "dir/bad.safetensors"); });
  EXPECT_NE(message.find("dir/bad.safetensors"), std::string::npos) << message;
  return message;
}

std::string entry(const std::string& name, const std::string& fields) { return "{\"" + name + "\":{" + fields + "}}"; }

TEST(Safetensors, RefusesBadHeaderLengths) {
  EXPECT_NE(refusal("").find("shorter than the 8-byte header length"), std::string::npos);
  EXPECT_NE(refusal("abc").find("shorter"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes("{}", "", 3)).find("runs past the end"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes("{}", "", 1ull << 40)).find("absurd"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes("{}", "", ~0ull)).find("absurd"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes("{}", "", 100'000'001)).find("absurd"), std::string::npos);
}

TEST(Safetensors, RefusesHeadersThatAreNotJsonObjects) {
  EXPECT_NE(refusal(safetensors_bytes("{\"a\":")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes("[1,2]")).find("not an object"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes("{\"a\":1e999}")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes("\xff\xfe")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes(std::string(100000, '[') + std::string(100000, ']'))).find("nested"),
            std::string::npos);
}

TEST(Safetensors, RefusesEntriesWithMissingOrMistypedFields) {
  const std::string ok_offsets = "\"data_offsets\":[0,4]";
  const auto check = [](const std::string& header, const std::string& problem) {
    const std::string m = refusal(safetensors_bytes(header, std::string(16, '\0')));
    EXPECT_NE(m.find("tensor \"w\""), std::string::npos) << m;
    EXPECT_NE(m.find(problem), std::string::npos) << m;
  };
  check(entry("w", "\"shape\":[1]," + ok_offsets), "no \"dtype\"");
  check(entry("w", "\"dtype\":\"F32\"," + ok_offsets), "no \"shape\"");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":[1]"), "no \"data_offsets\"");
  check(entry("w", "\"dtype\":5,\"shape\":[1]," + ok_offsets), "\"dtype\" is a JSON number");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":\"1\"," + ok_offsets), "\"shape\" is a JSON string");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]"), "not [begin, end]");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]"), "not [begin, end]");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-1,4]"), "not [begin, end]");
  check("{\"w\":[1,2]}", "entry is a JSON array");
  check(entry("w", "\"dtype\":\"F17\",\"shape\":[1]," + ok_offsets), "unknown dtype \"F17\"");
  check(entry("w", "\"dtype\":\"f32\",\"shape\":[1]," + ok_offsets), "unknown dtype");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":[-1]," + ok_offsets), "\"shape\" holds -1");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":[1.5]," + ok_offsets), "\"shape\" holds 1.5");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":[4611686018427387904,4]," + ok_offsets), "more elements");
  check(entry("w", "\"dtype\":\"F32\",\"shape\":[18446744073709551615]," + ok_offsets), "more elements");
  EXPECT_NE(refusal(safetensors_bytes("{\"__metadata__\":[1]}")).find("__metadata__"), std::string::npos);
  EXPECT_NE(refusal(safetensors_bytes("{\"__metadata__\":{\"a\":1}}")).find("entry \"a\" is a JSON number"),
            std::string::npos);
}

TEST(Safetensors, RefusesOffsetsOutsideReversedMissizedOrOverlapping) {
  const auto check = [](const std::string& header, std::size_t data, const std::string& tensor,
                        const std::string& problem) {
    const std::string m = refusal(safetensors_bytes(header, std::string(data, '\0')));
    EXPECT_NE(m.find("tensor \"" + tensor + "\""), std::string::npos) << m;
    EXPECT_NE(m.find(problem), std::string::npos) << m;
  };
  check(entry("w", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), 4, "w", "outside the data area of 4 bytes");
  check(entry("w", R"("dtype":"F32","shape":[1],"data_offsets":[8,4])"), 8, "w", "end before begin");
  check(entry("w", R"("dtype":"F32","shape":[3],"data_offsets":[0,8])"), 8, "w", "needs 12");
  check(entry("w", R"("dtype":"BF16","shape":[2,2],"data_offsets":[0,16])"), 16, "w", "needs 8");
  check(entry("w", R"("dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615])"), 8, "w", "outside");
  check(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12, "b", "overlap those of tensor \"a\"");
  // Zero-sized tensors overlap nothing; equal ranges do.
  const std::string zero =
      R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string zero_bytes = safetensors_bytes(zero, std::string(8, '\0'));
  EXPECT_NO_THROW((void)SafetensorsFile::parse(std::as_bytes(std::span(zero_bytes)), "z"));
  check(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
      4, "b", "overlap");
}

TEST(Safetensors, ListsEveryProblemAndEscapesNames) {
  const std::string header =
      R"({"x":{"dtype":"F99","shape":[1],"data_offsets":[0,4]},"y":{"shape":[1],"data_offsets":[0,4]}})";
  const std::string m = refusal(safetensors_bytes(header, std::string(4, '\0')));
  EXPECT_NE(m.find("tensor \"x\": unknown dtype"), std::string::npos) << m;
  EXPECT_NE(m.find("tensor \"y\": no \"dtype\""), std::string::npos) << m;
  const std::string ctl = refusal(safetensors_bytes(entry("a\\u0001\\n", R"("dtype":"X")"), ""));
  EXPECT_NE(ctl.find("tensor \"a\\x01\\x0a\""), std::string::npos) << ctl;
  std::string many = "{";
  for (int i = 0; i < 30; ++i) many += (i ? "," : "") + std::string("\"t") + std::to_string(i) + "\":1";
  EXPECT_NE(refusal(safetensors_bytes(many + "}")).find("and 10 more problems"), std::string::npos);
}

TEST(Safetensors, RefusesMissingTensorsWrongShapesAndNonFloats) {
  TempDir dir;
  Writer w;
  w.add("ids", "I64", "[2]", std::string(16, '\0')).add("w", "F32", "[2,2,1]", std::string(16, '\0'));
  w.write(dir / "m.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(dir / "m.safetensors");  // integers are accepted in a header
  const std::string path = (dir / "m.safetensors").string();
  const auto check = [&](auto&& f, const std::string& problem) {
    const std::string m = config_error(f);
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(problem), std::string::npos) << m;
  };
  check([&] { (void)file.values("nope"); }, "tensor \"nope\" is missing");
  check([&] { (void)file.tensor("nope"); }, "tensor \"nope\" is missing");
  check([&] { file.expect("w", {2, 2}); }, "tensor \"w\" has shape [2, 2, 1], expected [2, 2]");
  check([&] { file.expect("w", {2, 1, 2}); }, "expected [2, 1, 2]");
  check([&] { (void)file.values("ids"); }, "tensor \"ids\" has dtype I64, not a float");
  check([&] { (void)file.matrix("w"); }, "tensor \"w\" has shape [2, 2, 1], not a matrix");
  EXPECT_NO_THROW(file.expect("w", {2, 2, 1}));
  EXPECT_EQ(file.raw("ids").size(), 16u);
}

TEST(Safetensors, RowsConvertOnlyTheRowsAskedFor) {
  // 4 x 3 tables in F32, F16 and BF16 after a 1-byte tensor (unaligned): rows 1..2 of each are
  // exactly the same rows of the whole tensor.
  const std::vector<float> f32{0, 1, 2, 3, 4.5f, -5, 6, 7, 1e-40f, 9, 10, 11};
  const std::vector<std::uint16_t> f16{0x3c00, 0x8001, 0x7bff, 0xc000, 0x0001, 0x3555,
                                       0x4000, 0x4200, 0x4400, 0x4500, 0x4600, 0x4700};
  const std::vector<std::uint16_t> bf16{0x3f80, 0x8001, 0x7f7f, 0x4049, 0xc000, 0x3eaa,
                                        0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0, 0x40e0};
  TempDir dir;
  Writer w;
  w.add("odd", "U8", "[1]", std::string(1, '\x07'))
      .add("f32", "F32", "[4,3]", test::bytes_of(f32))
      .add("f16", "F16", "[4,3]", test::bytes_of(f16))
      .add("bf16", "BF16", "[4,3]", test::bytes_of(bf16))
      .add("flat", "F32", "[12]", test::bytes_of(f32))
      .add("ids", "I64", "[2,1]", std::string(16, '\0'))
      .write(dir / "m.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(dir / "m.safetensors");
  for (const char* name : {"f32", "f16", "bf16"}) {
    const std::vector<double> all = file.values(name);
    std::vector<double> two(6);
    file.rows(name, 1, 2, two);
    for (std::size_t i = 0; i < two.size(); ++i) EXPECT_EQ(two[i], all[3 + i]) << name << " " << i;
    std::vector<double> last(3);
    file.rows(name, 3, 1, last);
    for (std::size_t i = 0; i < last.size(); ++i) EXPECT_EQ(last[i], all[9 + i]) << name << " " << i;
    std::vector<double> none;
    EXPECT_NO_THROW(file.rows(name, 4, 0, none));
  }
  std::vector<double> out(3);
  EXPECT_THROW(file.rows("f32", 4, 1, out), Error);
  EXPECT_THROW(file.rows("f32", 2, 3, out), Error);
  EXPECT_THROW(file.rows("f32", 0, 2, out), Error);  // out holds one row, not two
  const std::string flat = config_error([&] { file.rows("flat", 0, 1, out); });
  EXPECT_NE(flat.find("tensor \"flat\" has shape [12], not 2-D"), std::string::npos) << flat;
  const std::string ids = config_error([&] { file.rows("ids", 0, 1, out); });
  EXPECT_NE(ids.find("tensor \"ids\" has dtype I64, not a float"), std::string::npos) << ids;
  const std::string missing = config_error([&] { file.rows("nope", 0, 1, out); });
  EXPECT_NE(missing.find((dir / "m.safetensors").string() + ": tensor \"nope\" is missing"), std::string::npos)
      << missing;
}

TEST(Safetensors, DtypeTable) {
  for (const char* name : {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
                           "F64", "I64", "U64"}) {
    const auto d = parse_dtype(name);
    ASSERT_TRUE(d.has_value()) << name;
    EXPECT_EQ(dtype_name(*d), name);
  }
  EXPECT_EQ(dtype_size(Dtype::BF16), 2u);
  EXPECT_EQ(dtype_size(Dtype::F64), 8u);
  EXPECT_FALSE(parse_dtype("F32 ").has_value());
  EXPECT_TRUE(is_convertible(Dtype::BF16));
  EXPECT_FALSE(is_convertible(Dtype::I64));
  std::vector<double> out(2);
  const std::string three(3, '\0');
  EXPECT_THROW(convert_to_double(Dtype::F16, std::as_bytes(std::span(three)), out), Error);
}

}  // namespace
}  // namespace rcsweep::checkpoint

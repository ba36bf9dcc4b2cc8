//===- TokenizerTest.cpp - Unit tests of lib/Tokenizer --------------------===//
//
// Part of mtc. Every fixture under test/fixtures/tokenizers (written by
// test/fixtures/gen_tokenizer_fixtures.py with the `tokenizers` library):
// encode must give the library's ids, decode its text, for every string; then
// load errors, the regex subset, the Unicode helpers and token files.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/Tokenizer.h"
#include "lib/Tokenizer/Regex.h"
#include "lib/Tokenizer/TokenFile.h"
#include "lib/Tokenizer/Unicode.h"
#include "runtime/train/Data.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace mtc;
using namespace mtc::tok;
using json = nlohmann::json;

namespace {

std::string fixtureDir() {
  return std::string(MTC_SOURCE_DIR) + "/test/fixtures/tokenizers";
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tempPath(const std::string &name) {
  // mkdtemp: a directory left behind by an earlier process with the same
  // pid is never reused.
  std::string d = ::testing::TempDir() + "/mtc-tok-XXXXXX";
  if (!::mkdtemp(d.data()))
    ADD_FAILURE() << "mkdtemp " << d << " failed";
  return d + "/" + name;
}

std::vector<uint32_t> idsOf(const json &v) {
  std::vector<uint32_t> out;
  for (const json &x : v)
    out.push_back(x.get<uint32_t>());
  return out;
}

/// A printable form of a test string for failure messages.
std::string shown(const std::string &s) { return json(s).dump(); }

const char *const kFixtures[] = {
    "bytelevel-gpt2", "bytelevel-llama3", "bytelevel-qwen2",  "sp-llama2",
    "sp-metaspace",   "sp-gemma",         "misc-normalizers", "misc-subword"};

class FixtureTest : public ::testing::TestWithParam<const char *> {};

TEST_P(FixtureTest, EncodeAndDecodeMatchTheLibrary) {
  std::string dir = fixtureDir() + "/" + GetParam();
  Expected<Tokenizer> tok = Tokenizer::load(dir);
  ASSERT_TRUE(tok.ok()) << tok.message();
  json expected = json::parse(readFile(dir + "/expected.json"));
  EXPECT_EQ(tok->vocabSize(), expected["vocab_size"].get<uint32_t>());
  size_t n = 0;
  for (const json &c : expected["cases"]) {
    std::string text = c["text"].get<std::string>();
    std::vector<uint32_t> ids = idsOf(c["ids"]);
    Expected<std::vector<uint32_t>> got = tok->encode(text);
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(*got, ids) << "encode " << shown(text);
    std::string decoded =
        c.contains("decoded") ? c["decoded"].get<std::string>() : text;
    EXPECT_EQ(tok->decode(ids), decoded) << "decode of " << shown(text);
    if (c.contains("ids_special")) {
      std::vector<uint32_t> sp = idsOf(c["ids_special"]);
      Expected<std::vector<uint32_t>> gotSp = tok->encode(text, true);
      ASSERT_TRUE(gotSp.ok()) << gotSp.message();
      EXPECT_EQ(*gotSp, sp) << "encode with special tokens " << shown(text);
      std::string skip = c.contains("decoded_skip")
                             ? c["decoded_skip"].get<std::string>()
                             : decoded;
      EXPECT_EQ(tok->decode(sp, /*skipSpecialTokens=*/true), skip)
          << "decode skipping special tokens of " << shown(text);
    }
    ++n;
  }
  EXPECT_GE(n, 150u);
}

TEST_P(FixtureTest, SampleIds) {
  std::string dir = fixtureDir() + "/" + GetParam();
  Expected<Tokenizer> tok = Tokenizer::load(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.message();
  std::istringstream line(readFile(dir + "/sample.ids"));
  std::vector<uint32_t> ids;
  for (uint32_t id; line >> id;)
    ids.push_back(id);
  Expected<std::vector<uint32_t>> got =
      tok->encode(readFile(fixtureDir() + "/sample.txt"));
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(*got, ids);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, FixtureTest,
                         ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           std::string s = i.param;
                           for (char &c : s)
                             if (c == '-')
                               c = '_';
                           return s;
                         });

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

std::string loadError(const std::string &text) {
  Expected<Tokenizer> t = Tokenizer::fromJson(text, "tokenizer.json");
  return t.ok() ? std::string("<loaded>") : t.message();
}

const char *kMinimal = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1,
  "ab": 2}, "merges": ["a b"]}})";

TEST(TokenizerErrors, Minimal) {
  Expected<Tokenizer> t = Tokenizer::fromJson(kMinimal, "tokenizer.json");
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(*t->encode("abab"), (std::vector<uint32_t>{2, 2}));
  EXPECT_EQ(t->decode({2, 0}), "ab a"); // no decoder: tokens joined by ' '
  EXPECT_EQ(t->vocabSize(), 3u);
}

TEST(TokenizerErrors, Messages) {
  EXPECT_EQ(loadError(R"({"model": {"type": "WordPiece", "vocab": {}}})"),
            "tokenizer.json: model.type 'WordPiece' is not supported "
            "(supported: BPE)");
  EXPECT_EQ(loadError(R"({"model": {"type": "Unigram", "vocab": []}})"),
            "tokenizer.json: model.type 'Unigram' is not supported "
            "(supported: BPE)");
  EXPECT_EQ(loadError("{\"model\": "),
            "tokenizer.json: not valid JSON: parse error at line 1, column "
            "11: syntax error while parsing value - unexpected end of input; "
            "expected '[', '{', or a literal");
  EXPECT_EQ(loadError("[1, 2]"), "tokenizer.json: expected a JSON object at "
                                 "the top level, got an array");
  EXPECT_EQ(loadError("{}"), "tokenizer.json: missing field 'model'");
  EXPECT_EQ(loadError(R"({"version": "2.0", "model": {}})"),
            "tokenizer.json: version '2.0' is not supported (supported: 1.0)");
  EXPECT_EQ(loadError(R"({"model": {"type": "BPE", "vocab": []}})"),
            "tokenizer.json: model.vocab: expected an object, got an array");
  EXPECT_EQ(loadError(R"({"model": {"type": "BPE", "vocab": {"a": -1},
              "merges": []}})"),
            "tokenizer.json: model.vocab['a']: value -1 out of range [0, "
            "2147483647]");
  EXPECT_EQ(loadError(R"({"model": {"type": "BPE", "vocab": {"a": 0}}})"),
            "tokenizer.json: model: missing field 'merges'");
  EXPECT_EQ(loadError(R"({"model": {"type": "BPE", "vocab": {"a": 0},
              "merges": ["a b"]}})"),
            "tokenizer.json: model.merges[0]: token 'b' is not in "
            "model.vocab");
  EXPECT_EQ(loadError(R"({"model": {"type": "BPE", "vocab": {"a": 0},
              "merges": ["a a"]}})"),
            "tokenizer.json: model.merges[0]: the merged token 'aa' is not "
            "in model.vocab");
  EXPECT_EQ(loadError(R"({"model": {"type": "BPE", "vocab": {"a": 0},
              "merges": ["a"]}})"),
            "tokenizer.json: model.merges[0]: 'a' is not a pair of tokens "
            "'a b'");
  EXPECT_EQ(loadError(R"({"model": {"type": "BPE", "vocab": {"a": 0},
              "merges": [], "dropout": 0.1}})"),
            "tokenizer.json: model.dropout: BPE dropout 0.1 is not supported "
            "(it makes tokenization random)");
  EXPECT_EQ(loadError(R"({"model": {"type": "BPE", "vocab": {"a": 0},
              "merges": [], "unk_token": "<unk>"}})"),
            "tokenizer.json: model.unk_token: '<unk>' is not in model.vocab");
  std::string bpe = R"("model": {"type": "BPE", "vocab": {"a": 0},
                       "merges": []})";
  EXPECT_EQ(loadError("{" + bpe + R"(, "normalizer": {"type": "Lowercase"}})"),
            "tokenizer.json: normalizer.type 'Lowercase' is not supported "
            "(supported: NFC, NFD, Prepend, Replace, Strip, Sequence)");
  EXPECT_EQ(loadError("{" + bpe + R"(, "normalizer": {"type": "Sequence",
              "normalizers": [{"type": "NFC"}, {"type": "NFKC"}]}})"),
            "tokenizer.json: normalizer.normalizers[1].type 'NFKC' is not "
            "supported (supported: NFC, NFD, Prepend, Replace, Strip, "
            "Sequence)");
  EXPECT_EQ(
      loadError("{" + bpe + R"(, "pre_tokenizer": {"type": "Whitespace"}})"),
      "tokenizer.json: pre_tokenizer.type 'Whitespace' is not supported "
      "(supported: ByteLevel, Split, Metaspace, Digits, Sequence)");
  EXPECT_EQ(loadError("{" + bpe + R"(, "pre_tokenizer": {"type": "Sequence",
              "pretokenizers": [{"type": "Split", "pattern": {"Regex":
              "\\p{Han}+"}, "behavior": "Isolated", "invert": false}]}})"),
            "tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex: "
            "unsupported regex: unsupported property 'Han' (supported: "
            "general categories such as L, Lu, N, Nd, P) at offset 0 "
            "(pattern '\\p{Han}+')");
  EXPECT_EQ(loadError("{" + bpe + R"(, "pre_tokenizer": {"type": "Split",
              "pattern": {"Regex": "(?<=a)b"}, "behavior": "Isolated"}})"),
            "tokenizer.json: pre_tokenizer.pattern.Regex: unsupported regex: "
            "lookbehind is not supported at offset 0 (pattern '(?<=a)b')");
  EXPECT_EQ(loadError("{" + bpe + R"(, "pre_tokenizer": {"type": "Split",
              "pattern": {"Regex": "a"}, "behavior": "Sideways"}})"),
            "tokenizer.json: pre_tokenizer.behavior: 'Sideways' is not a "
            "split behavior (Removed, Isolated, MergedWithPrevious, "
            "MergedWithNext, Contiguous)");
  EXPECT_EQ(loadError("{" + bpe + R"(, "decoder": {"type": "WordPiece"}})"),
            "tokenizer.json: decoder.type 'WordPiece' is not supported "
            "(supported: ByteLevel, ByteFallback, Fuse, Strip, Replace, "
            "Metaspace, Sequence)");
  EXPECT_EQ(loadError("{" + bpe + R"(, "post_processor": {"type":
              "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>",
              "type_id": 0}}], "special_tokens": {}}})"),
            "tokenizer.json: post_processor.single[0].SpecialToken.id: '<s>' "
            "is not in post_processor.special_tokens");
  EXPECT_EQ(loadError("{" + bpe + R"(, "added_tokens": [{"id": 1}]})"),
            "tokenizer.json: added_tokens[0]: missing field 'content'");
  EXPECT_EQ(loadError("{" + bpe + R"(, "pre_tokenizer": {"type": "Metaspace",
              "replacement": "ab"}})"),
            "tokenizer.json: pre_tokenizer.replacement: expected a single "
            "character, got 'ab'");
}

TEST(TokenizerErrors, MissingFileAndInvalidText) {
  Expected<Tokenizer> t = Tokenizer::load("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("/nonexistent/dir/tokenizer.json"),
            std::string::npos)
      << t.message();

  Expected<Tokenizer> ok = Tokenizer::fromJson(kMinimal, "tokenizer.json");
  ASSERT_TRUE(ok.ok());
  Expected<std::vector<uint32_t>> bad = ok->encode("ab\xff"
                                                   "a");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "invalid UTF-8 at byte 2 (tokenizers take text)");
}

TEST(TokenizerErrors, CatastrophicRegexIsAnError) {
  Expected<Tokenizer> t = Tokenizer::fromJson(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
          "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a*)*b"},
          "behavior": "Isolated"}})",
      "tokenizer.json");
  ASSERT_TRUE(t.ok()) << t.message();
  Expected<std::vector<uint32_t>> r = t->encode(std::string(40, 'a'));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("too many backtracking steps"), std::string::npos)
      << r.message();
}

//===----------------------------------------------------------------------===//
// Components
//===----------------------------------------------------------------------===//

std::vector<std::string> splits(const std::string &pattern,
                                const std::string &text) {
  Regex re;
  Status st = re.compile(pattern);
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<std::string> out;
  for (auto [s, e] : re.findAll(text))
    out.push_back(text.substr(s, e - s));
  return out;
}

TEST(TokenizerRegex, Gpt2Pattern) {
  const std::string gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
                           "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
  EXPECT_EQ(splits(gpt2, "Hello world's  end!!\n"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " end",
                                      "!!", "\n"}));
  EXPECT_EQ(splits(gpt2, "a   b"), (std::vector<std::string>{"a", "  ", " b"}));
}

TEST(TokenizerRegex, Llama3Pattern) {
  const std::string llama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
      "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  EXPECT_EQ(splits(llama3, "I'LL pay 1234567 \xE2\x82\xAC!\n\n  x"),
            (std::vector<std::string>{"I", "'LL", " pay", " ", "123", "456",
                                      "7", " \xE2\x82\xAC!\n\n", " ", " x"}));
}

TEST(TokenizerRegex, Constructs) {
  EXPECT_EQ(splits("a{2,3}?", "aaaaa"), (std::vector<std::string>{"aa", "aa"}));
  EXPECT_EQ(splits("x*", "ab"), (std::vector<std::string>{"", "", ""}));
  EXPECT_EQ(splits("\\bfoo\\b", "foo food foo"),
            (std::vector<std::string>{"foo", "foo"}));
  EXPECT_EQ(splits("(?i)hello", "HeLLo hello"),
            (std::vector<std::string>{"HeLLo", "hello"}));
  EXPECT_EQ(splits("[a-c]+(?=d)", "abcd abce"),
            (std::vector<std::string>{"abc"}));
  EXPECT_EQ(splits("\\x{65E5}|\\u672c", "\xE6\x97\xA5\xE6\x9C\xAC"),
            (std::vector<std::string>{"\xE6\x97\xA5", "\xE6\x9C\xAC"}));
  Regex re;
  // Oniguruma: ^ does not match after a newline that ends the text; an
  // iteration that matches nothing ends a loop, its minimum included.
  EXPECT_EQ(splits("\n^", "a\nb\n"), (std::vector<std::string>{"\n"}));
  EXPECT_EQ(splits("\\W(?:\\h\\r|x??\\b){2}", "\rA\r!"),
            (std::vector<std::string>{"\r"}));
  // \w outside a class counts U+00B2 (Oniguruma's Latin-1 table), inside not.
  EXPECT_EQ(splits("\\w+|[^\\w\\s]+", "&\xC2\xB2x"),
            (std::vector<std::string>{"&\xC2\xB2", "x"}));
  EXPECT_EQ(splits("\\w+", "&\xC2\xB2x"),
            (std::vector<std::string>{"\xC2\xB2x"}));
  EXPECT_EQ(re.compile("(a").message(), "missing ')' at offset 0");
  EXPECT_EQ(re.compile("a)").message(), "unbalanced ')' at offset 1");
  EXPECT_EQ(re.compile("\\1").message(),
            "unsupported escape '\\1' at offset 0");
}

TEST(TokenizerUnicode, Categories) {
  EXPECT_EQ(category('A'), Category::Lu);
  EXPECT_EQ(category(0x65E5), Category::Lo);
  EXPECT_EQ(category(0x0663), Category::Nd);
  EXPECT_EQ(category(0x2162), Category::Nl);
  EXPECT_EQ(category(0x0301), Category::Mn);
  EXPECT_EQ(category(0x1F600), Category::So);
  EXPECT_EQ(category(0x10FFFF), Category::Cn);
  EXPECT_TRUE(isWhiteSpace(0x3000));
  EXPECT_FALSE(isWhiteSpace(0x1C)); // Python's isspace() says yes
  EXPECT_TRUE(isWordChar(0x24B6));  // circled A: Other_Alphabetic
  EXPECT_TRUE(isWordChar(0xB2));
  EXPECT_FALSE(isClassWordChar(0xB2));
  EXPECT_FALSE(isWordChar(0x200D));
  EXPECT_TRUE(isRustWordChar(0x200D));        // Join_Control
  EXPECT_EQ(category(0x1CCF0), Category::Nd); // new in Unicode 16.0
}

TEST(TokenizerUnicode, Normalization) {
  // e + acute -> U+00E9; the dot below is reordered before the dot above.
  EXPECT_EQ(toNFC("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(toNFD("\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(toNFC("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");
  // Hangul: L + V + T compose algorithmically.
  EXPECT_EQ(toNFC("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");
  // U+212B ANGSTROM SIGN is a singleton: NFC gives U+00C5.
  EXPECT_EQ(toNFC("\xE2\x84\xAB"), "\xC3\x85");
}

TEST(TokenizerUnicode, Utf8) {
  EXPECT_EQ(findInvalidUtf8("abc"), std::string_view::npos);
  EXPECT_EQ(findInvalidUtf8("a\xC0\x80"), 1u);        // overlong
  EXPECT_EQ(findInvalidUtf8("ab\xED\xA0\x80"), 2u);   // surrogate
  EXPECT_EQ(findInvalidUtf8("\xF4\x90\x80\x80"), 0u); // > U+10FFFF
  EXPECT_EQ(findInvalidUtf8("\xE6\x97"), 0u);         // truncated
  // from_utf8_lossy: one U+FFFD per maximal invalid subpart.
  EXPECT_EQ(utf8Lossy("a\xE6\x97z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(utf8Lossy("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8Lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");
}

//===----------------------------------------------------------------------===//
// Token files
//===----------------------------------------------------------------------===//

TEST(TokenFile, RoundTripAndTrainingReader) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 600; ++i)
    ids.push_back((i * 7919) % 400);
  std::string path = tempPath("tokens.bin");
  int version = 0;
  ASSERT_TRUE(writeTokenFile(path, ids, 400, &version).ok());
  EXPECT_EQ(version, 1);
  EXPECT_EQ(readFile(path).size(), 1024 + 2 * ids.size());
  Expected<std::vector<uint32_t>> back = readTokenFile(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, ids);

  train::TokenDatasetOptions opts;
  opts.vocabSize = 400;
  opts.seqLen = 16;
  Expected<train::TokenDataset> data = train::TokenDataset::open(path, opts);
  ASSERT_TRUE(data.ok()) << data.message();
  EXPECT_EQ(data->format(), train::TokenFileFormat::LlmcBin);
  EXPECT_EQ(data->tokenBytes(), 2u);
  EXPECT_EQ(data->numTokens(), ids.size());
  EXPECT_EQ(data->token(123), ids[123]);
}

TEST(TokenFile, WideVocabulary) {
  std::vector<uint32_t> ids = {0, 65535, 65536, 151000, 7};
  std::string path = tempPath("wide.bin");
  int version = 0;
  ASSERT_TRUE(writeTokenFile(path, ids, 151643, &version).ok());
  EXPECT_EQ(version, 2);
  EXPECT_EQ(readFile(path).size(), 1024 + 4 * ids.size());
  Expected<std::vector<uint32_t>> back = readTokenFile(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, ids);

  train::TokenDatasetOptions opts;
  opts.vocabSize = 151643;
  opts.seqLen = 2;
  opts.valFraction = 0;
  Expected<train::TokenDataset> data = train::TokenDataset::open(path, opts);
  ASSERT_TRUE(data.ok()) << data.message();
  EXPECT_EQ(data->tokenBytes(), 4u);
  EXPECT_EQ(data->token(3), 151000u);
}

TEST(TokenFile, ReadErrors) {
  std::string path = tempPath("bad.bin");
  std::ofstream(path) << "hello";
  Expected<std::vector<uint32_t>> r = readTokenFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(),
            path + ": not an llm.c token file (no magic " + "20240520)");
}

} // namespace

